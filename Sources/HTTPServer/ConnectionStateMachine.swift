/// The life of one connection as a value: events in, actions out, no I/O.
///
/// Generic over the instant type so tests drive it with a fake clock. Every phase has an absolute
/// deadline (head, body, idle keep-alive, write, lingering close); the event loop asks
/// ``timerFired(now:)`` periodically and acts on the answer.
///
/// ```
/// awaitingRequest ─bytes→ readingHead ─head→ readingBody ─request→ processing ─response→ writing
///        ↑                     └──────────────request──────────────────↑                  │
///        └──────────────────────────── written, keep-alive ───────────────────────────────┘
/// writing ─written, close→ lingering ─EOF/deadline→ closed
/// processing ─written by the worker (keep-alive)→ awaitingRequest   (or closed when shutting down)
/// processing ─event stream accepted→ streaming ─peer EOF, cut, shutdown→ closed
/// ```
///
/// A `streaming` connection has no deadline at all (head, idle and write deadlines would cut a live
/// stream); its reader is watched by the bounded output buffer instead (see `EventStreams`).
///
/// While `processing`, the worker may be writing the socket itself (see `Handoff`), so the
/// connection must not be closed: no deadline runs (``timerFired(now:)`` answers `.none`) and
/// ``beginShutdown()`` leaves it to finish. The event loop enforces this in its `close`.
struct ConnectionStateMachine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    struct Timeouts: Sendable {
        var head: Duration
        var body: Duration
        var idle: Duration
        var write: Duration
        var linger: Duration
    }

    enum State: Equatable, Sendable {
        /// No byte of the next request yet.
        case awaitingRequest(deadline: Instant)
        case readingHead(deadline: Instant)
        case readingBody(deadline: Instant)
        /// The request is with a worker; the connection is not read (backpressure).
        case processing
        case writing(deadline: Instant, closeAfter: Bool)
        /// An event stream: the server writes events as they come until either side closes.
        case streaming
        /// Response sent, write side shut down; reading and discarding until EOF so the client
        /// sees the response rather than a reset.
        case lingering(deadline: Instant)
        case closed
    }

    enum Action: Equatable, Sendable {
        case none
        /// Close the socket now.
        case close
        /// Shut down the write side and read until EOF (lingering close).
        case linger
        /// A request was too slow: answer 408 and close.
        case sendRequestTimeout
    }

    private(set) var state: State
    private(set) var isShuttingDown = false
    let timeouts: Timeouts

    /// A new connection must deliver a request head within the head deadline.
    init(now: Instant, timeouts: Timeouts) {
        self.timeouts = timeouts
        self.state = .awaitingRequest(deadline: now.advanced(by: timeouts.head))
    }

    /// Whether bytes should be read and parsed.
    var isReading: Bool {
        switch state {
        case .awaitingRequest, .readingHead, .readingBody: true
        default: false
        }
    }

    var isIdle: Bool {
        if case .awaitingRequest = state { return true }
        return false
    }

    var deadline: Instant? {
        switch state {
        case .awaitingRequest(let deadline), .readingHead(let deadline), .readingBody(let deadline),
            .writing(let deadline, _), .lingering(let deadline):
            deadline
        case .processing, .streaming, .closed: nil
        }
    }

    /// Bytes of a request arrived: the head deadline starts with the first one.
    mutating func receivedRequestBytes(now: Instant) {
        if case .awaitingRequest = state { state = .readingHead(deadline: now.advanced(by: timeouts.head)) }
    }

    /// The head is complete and a body follows.
    mutating func headCompleted(now: Instant) {
        switch state {
        case .awaitingRequest, .readingHead: state = .readingBody(deadline: now.advanced(by: timeouts.body))
        default: break
        }
    }

    /// A complete request went to a worker.
    mutating func requestDispatched() {
        precondition(isReading, "request dispatched in \(state)")
        state = .processing
    }

    /// The worker's answer opened an event stream.
    mutating func streamStarted() {
        precondition(state == .processing, "stream started in \(state)")
        state = .streaming
    }

    var isStreaming: Bool { state == .streaming }

    /// A response (the worker's, or the server's own) starts to be written.
    mutating func responseStarted(now: Instant, closeAfter: Bool) {
        guard state != .closed else { return }
        state = .writing(deadline: now.advanced(by: timeouts.write), closeAfter: closeAfter || isShuttingDown)
    }

    /// The response is fully written.
    mutating func responseWritten(now: Instant) -> Action {
        guard case .writing(_, let closeAfter) = state else { return .none }
        if closeAfter {
            state = .lingering(deadline: now.advanced(by: timeouts.linger))
            return .linger
        }
        if isShuttingDown {
            state = .closed
            return .close
        }
        state = .awaitingRequest(deadline: now.advanced(by: timeouts.idle))
        return .none
    }

    /// The worker wrote the whole keep-alive response itself and handed the connection back.
    mutating func responseWrittenByWorker(now: Instant) -> Action {
        guard state == .processing else { return .none }
        if isShuttingDown {
            state = .closed
            return .close
        }
        state = .awaitingRequest(deadline: now.advanced(by: timeouts.idle))
        return .none
    }

    /// The peer closed or the socket failed.
    mutating func closed() {
        state = .closed
    }

    /// Checks the current phase's deadline.
    mutating func timerFired(now: Instant) -> Action {
        guard let deadline, deadline <= now else { return .none }
        switch state {
        case .readingHead, .readingBody:
            return .sendRequestTimeout
        case .awaitingRequest, .writing, .lingering:
            state = .closed
            return .close
        case .processing, .streaming, .closed:
            return .none
        }
    }

    /// Graceful shutdown began: idle connections and streams close now (a stream's client reconnects
    /// to another instance); the others close after their response.
    mutating func beginShutdown() -> Action {
        isShuttingDown = true
        if state == .streaming {
            state = .closed
            return .close
        }
        if case .awaitingRequest = state {
            state = .closed
            return .close
        }
        return .none
    }
}
