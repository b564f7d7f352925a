/// When the next connect may be tried after failed ones: an initial delay, doubling to a maximum.
///
/// While waiting, calls fail fast instead of each spending a `connect_timeout` on a server that
/// is down. A successful connect resets it. Held by ``PostgresServerHealth``.
struct ReconnectBackoff {
    let initialDelay: Duration
    let maximumDelay: Duration
    private var nextDelay: Duration
    private var retryAt: ContinuousClock.Instant?

    init(initialDelay: Duration, maximumDelay: Duration) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.nextDelay = initialDelay
    }

    func isWaiting(at now: ContinuousClock.Instant) -> Bool {
        retryAt.map { now < $0 } ?? false
    }

    /// Records a failed connect at `now`; returns how long calls will now fail fast.
    @discardableResult
    mutating func recordFailure(at now: ContinuousClock.Instant) -> Duration {
        let delay = nextDelay
        retryAt = now + delay
        nextDelay = min(delay * 2, maximumDelay)
        return delay
    }

    mutating func reset() {
        nextDelay = initialDelay
        retryAt = nil
    }
}
