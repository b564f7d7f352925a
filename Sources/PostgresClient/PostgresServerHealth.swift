import ServiceRuntime
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
    /// How long a read waits on a server that answers no connection at all before it gives up
    /// (docs/design.md §5.3): far below the statement timeout, which a stopped or cut-off server
    /// never runs.
    public let silenceLimit: Duration

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
    /// When any connection last heard from the server, in nanoseconds since `epoch`.
    private let lastAnswer = Atomic<Int64>(0)
    private let epoch = ContinuousClock.now

    /// - Parameters:
    ///   - initialDelay: the first backoff after a failed connect.
    ///   - maximumDelay: the backoff doubles up to this; it bounds how long after the server's
    ///     return the first connect is tried.
    ///   - probeTimeout: longer than a connect can take (`connect_timeout`).
    ///   - silenceLimit: see ``silenceLimit``.
    public init(
        initialDelay: Duration = .milliseconds(50), maximumDelay: Duration = .milliseconds(250),
        probeTimeout: Duration = .seconds(15), silenceLimit: Duration = .seconds(1)
    ) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.probeTimeout = probeTimeout
        self.silenceLimit = silenceLimit
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

    /// Records that a connection heard from the server (an answer's bytes arrived).
    func recordAnswer(at now: ContinuousClock.Instant) {
        let elapsed = epoch.duration(to: now).totalNanoseconds
        // Every statement of every worker passes here: store only when the value moved 10 ms.
        if elapsed - lastAnswer.load(ordering: .relaxed) >= 10_000_000 { lastAnswer.store(elapsed, ordering: .relaxed) }
    }

    /// Whether a statement sent at `sentAt` may stop waiting because the server has stopped
    /// answering everyone: it has waited ``silenceLimit``, and no connection has heard from the
    /// server for as long. A server that is merely slow keeps answering someone.
    func isSilent(toStatementSentAt sentAt: ContinuousClock.Instant, at now: ContinuousClock.Instant) -> Bool {
        guard sentAt.duration(to: now) >= silenceLimit else { return false }
        let heard = epoch + .nanoseconds(lastAnswer.load(ordering: .relaxed))
        return heard.duration(to: now) >= silenceLimit
    }
}
