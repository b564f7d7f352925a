import Synchronization

/// What every connection to one PostgreSQL server knows about it, shared by all of them.
///
/// Without it each ``PostgresConnection`` backs off on its own: after an outage, every worker
/// keeps failing fast until its own backoff (up to seconds) runs out, long after one of them
/// reached the server again; and during the outage every worker tries to connect. Shared
/// (docs/design.md §5):
///
/// - *up*: every connection connects when it needs to.
/// - *down* (a connect failed): calls fail at once; when the backoff (``initialDelay``
///   doubling to ``maximumDelay``) has run out, one connection — the probe — tries to connect
///   while the others keep failing fast. Its success marks the server up, and every other
///   connection connects on its next call; its failure starts the next backoff period.
///
/// ```swift
/// let health = PostgresServerHealth()
/// let connections = (0..<16).map { _ in PostgresConnection(configuration: c, statements: s, health: health, logger: l) }
/// ```
public final class PostgresServerHealth: Sendable {
    public let initialDelay: Duration
    public let maximumDelay: Duration
    /// A probe that has not reported within this time is presumed lost; another may start.
    public let probeTimeout: Duration

    enum Admission: Equatable {
        /// Up: connect.
        case connect
        /// Down, and this caller is the one probe: connect, then report.
        case probe
        /// Down: fail at once.
        case failFast
    }

    private struct State {
        var backoff: ReconnectBackoff
        var isDown = false
        var probeDeadline: ContinuousClock.Instant?
        /// libpq's message of the last failed connect.
        var lastFailure: String?
    }

    private let state: Mutex<State>
    /// Mirrors `state.isDown`, so that the healthy path takes no lock.
    private let down = Atomic<Bool>(false)

    /// - Parameters:
    ///   - initialDelay: the first backoff after a failed connect.
    ///   - maximumDelay: the backoff doubles up to this; it bounds how long after the server's
    ///     return the first connect is tried.
    ///   - probeTimeout: longer than a connect can take (`connect_timeout`).
    public init(
        initialDelay: Duration = .milliseconds(50), maximumDelay: Duration = .milliseconds(250),
        probeTimeout: Duration = .seconds(15)
    ) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.probeTimeout = probeTimeout
        state = Mutex(State(backoff: ReconnectBackoff(initialDelay: initialDelay, maximumDelay: maximumDelay)))
    }

    /// Whether the last connect to the server failed and none has succeeded since.
    public var isDown: Bool { down.load(ordering: .acquiring) }

    /// While the server is down, libpq's reason for the last failed connect ("password
    /// authentication failed for user …", "certificate verify failed", "Connection refused").
    public var downReason: String? {
        guard isDown else { return nil }
        return state.withLock { $0.isDown ? $0.lastFailure : nil }
    }

    func admitConnect(at now: ContinuousClock.Instant) -> Admission {
        guard isDown else { return .connect }
        return state.withLock { state in
            guard state.isDown else { return .connect }
            if state.backoff.isWaiting(at: now) { return .failFast }
            if let deadline = state.probeDeadline, now < deadline { return .failFast }
            state.probeDeadline = now + probeTimeout
            return .probe
        }
    }

    func recordConnected() {
        guard isDown else { return }
        state.withLock { state in
            state.isDown = false
            state.probeDeadline = nil
            state.backoff.reset()
            down.store(false, ordering: .releasing)
        }
    }

    /// Records a failed connect; returns how long calls will now fail fast.
    @discardableResult
    func recordConnectFailure(at now: ContinuousClock.Instant, reason: String) -> Duration {
        state.withLock { state in
            state.isDown = true
            state.lastFailure = reason
            state.probeDeadline = nil
            down.store(true, ordering: .releasing)
            return state.backoff.recordFailure(at: now)
        }
    }
}
