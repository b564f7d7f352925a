/// How one followed event stream reconnects, as a value: the end of each attempt gives the wait
/// before the next one and what observers are told. No I/O and no clock: the caller says
/// whether the stream proved healthy (``LiveUpdatePolicy``).
struct StreamReconnection {
    let policy: LiveUpdatePolicy
    /// Consecutive failures since a stream last proved healthy.
    private(set) var failures = 0
    /// The service's last `retry:`.
    private var retryHint: Duration?
    /// A failure was reported and no stream opened since.
    private var failing = false

    init(policy: LiveUpdatePolicy) {
        self.policy = policy
    }

    /// The service accepted a stream: `resumed` when a failure was reported since one last opened.
    mutating func streamOpened() -> ProfileEvent? {
        defer { failing = false }
        return failing ? .resumed : nil
    }

    /// The service closed a stream that proved healthy (its lifetime, a token's expiry, a drain):
    /// failures are forgotten.
    /// - Returns: the wait before reopening it: the service's `retry:` hint (at most
    ///   ``LiveUpdatePolicy/maximumServerDelay``), else none.
    mutating func healthyStreamClosed(retryHint hint: Duration?) -> Duration {
        retryHint = hint ?? retryHint
        failures = 0
        return min(retryHint ?? .zero, policy.maximumServerDelay)
    }

    /// An attempt failed: the connection was lost, refused, or closed before it proved healthy.
    /// - Parameters:
    ///   - error: what observers are told; `nil` for an expected refusal (a deleted profile's 404).
    ///   - healthy: the stream proved healthy before it failed: earlier failures are forgotten.
    ///   - retryHint: a `retry:` the stream sent.
    ///   - serverDelay: the wait the service asked for (`Retry-After`, or `retry:` for a stream
    ///     closed early), honoured up to ``LiveUpdatePolicy/maximumServerDelay``.
    ///   - randomUnit: a number in `0...1` (the jitter).
    /// - Returns: the wait before the next attempt, and the event to report, if any.
    mutating func attemptFailed(
        reporting error: ProfileClientError?, healthy: Bool, retryHint hint: Duration? = nil,
        serverDelay: Duration? = nil, randomUnit: Double
    ) -> (wait: Duration, report: ProfileEvent?) {
        retryHint = hint ?? retryHint
        failures = healthy ? 1 : failures + 1
        let wait = policy.delay(afterFailures: failures, serverDelay: serverDelay, randomUnit: randomUnit)
        guard let error else { return (wait, nil) }
        failing = true
        return (wait, .failed(error, willRetry: true))
    }
}

extension StreamReconnection {
    /// Continues from `failures` consecutive failures (of the streams it joins): its next failure
    /// waits longer than theirs did, not the initial delay.
    mutating func join(afterFailures failures: Int) {
        self.failures = max(self.failures, failures)
    }
}

/// What the streams of one ``FollowedStreams`` share of their reconnection: a stream opened
/// while the others fail (rows scrolled in during an outage, or after a 429) starts where they
/// stand — it waits the backoff they reached, and what the service asked, before its first
/// attempt — instead of connecting at once with a fresh backoff.
final class SharedBackoff: Sendable {
    struct Standing: Equatable {
        /// Consecutive failures of the streams since one last opened.
        var failures = 0
        /// The last wait the service asked for (`Retry-After`), if any.
        var serverDelay: Duration?
        /// The last failure was the network's (no answer at all): a return of the network wakes
        /// the wait.
        var networkFailed = false
    }

    private let standing = LockedValue(Standing())

    /// Where the streams stand now; `nil` while none fails.
    var current: Standing? {
        standing.withLock { $0.failures > 0 ? $0 : nil }
    }

    /// A stream's attempt failed, after `failures` consecutive failures of its own.
    func attemptFailed(failures: Int, serverDelay: Duration?, networkFailed: Bool) {
        standing.withLock { standing in
            standing.failures = max(standing.failures, failures)
            standing.serverDelay = serverDelay
            standing.networkFailed = networkFailed
        }
    }

    /// A stream opened: the service answers again.
    func streamOpened() {
        standing.withLock { $0 = Standing() }
    }
}
