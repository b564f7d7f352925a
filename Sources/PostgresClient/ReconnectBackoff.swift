/// When the next connect may be tried after failed ones: 50 ms, doubling to 2 s.
///
/// While waiting, calls fail fast instead of each spending a `connect_timeout` on a server that
/// is down. A successful connect resets it.
struct ReconnectBackoff {
    let initialDelay: Duration
    let maximumDelay: Duration
    private var nextDelay: Duration
    private var retryAt: ContinuousClock.Instant?

    init(initialDelay: Duration = .milliseconds(50), maximumDelay: Duration = .seconds(2)) {
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
