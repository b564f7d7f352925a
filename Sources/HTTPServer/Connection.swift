import HTTP1

/// One accepted socket and everything the event loop knows about it. Confined to the loop thread.
final class Connection {
    let fd: Int32
    /// Distinguishes this connection from a later one that reuses `fd`.
    let id: UInt64
    /// The peer's address in text (``HTTP1/HTTPRequest/peerAddress``).
    let peerAddress: String
    var machine: ConnectionStateMachine<ContinuousClock.Instant>
    var parser: HTTPRequestParser
    /// Bytes read but not yet parsed: pipelined requests behind the one being handled.
    var pending: [UInt8] = []
    /// Output not yet written, from `outputOffset`.
    var output: [UInt8] = []
    var outputOffset = 0
    /// Edge-triggered readiness: the socket may hold unread bytes.
    var mayRead = false
    /// The peer sent FIN.
    var peerClosed = false
    /// False once the descriptor is closed.
    var isOpen = true
    /// A socket error arrived while the request was in a worker: close once the worker is done.
    var failed = false
    /// Shared with the worker that has this connection's request, if any.
    let handoff = Handoff()
    /// Bytes dropped during a lingering close.
    var lingerBytes = 0
    /// What the connection follows once it is an event stream.
    var stream: StreamState?
    /// Requests handed to a worker so far: an idle connection that has served one is a
    /// keep-alive connection (a fresh one waits for its first request under the head deadline).
    var requestsDispatched = 0
    /// When the last request was handed to a worker: of two idle connections, the one whose last
    /// request came first has been idle the longest.
    var lastRequestAt: ContinuousClock.Instant?
    /// Set while the body of a request whose head the responder accepted is read: whether the
    /// request goes to the batch lane. What the responder made of the head waits in the loop's
    /// typed slots, under this connection's descriptor (``EventLoop``'s `classifiedHeads`).
    var headToBatchLane: Bool?

    init(
        fd: Int32, id: UInt64, peerAddress: String, machine: ConnectionStateMachine<ContinuousClock.Instant>,
        limits: HTTPRequestParser.Limits
    ) {
        self.fd = fd
        self.id = id
        self.peerAddress = peerAddress
        self.machine = machine
        self.parser = HTTPRequestParser(limits: limits)
    }

    var hasPendingOutput: Bool { outputOffset < output.count }

    var pendingOutputCount: Int { output.count - outputOffset }
}

/// An event-stream connection's subscriptions (docs/design.md §4).
struct StreamState {
    struct Place {
        /// The position of the last event of the topic sent on the stream: older ones are skipped.
        var position: Int64
        /// Gets the topic's events in their restricted form (``HTTP1/HTTPResponse/EventStream/Subscription/receivesRestricted``).
        var receivesRestricted = false
        /// Index in the event loop's list of the topic's streams.
        var index: Int
    }

    /// Per topic followed.
    var places: [Int64: Place]
    /// The end of a topic closes the stream (a stream of one) instead of being written to it.
    var endsWithTopic: Bool
    /// The stream's client, counted against the per-client limit until the stream ends.
    var client: String?
    /// When the server ends the stream, if it does.
    var endsAt: ContinuousClock.Instant?
    /// Unsent bytes beyond which the stream is cut: ``EventStreams/Configuration/maxBufferedBytes``
    /// plus the first bytes, which for a list's stream can be a thousand profiles.
    var bufferLimit: Int
}

@available(*, unavailable, message: "confined to the event loop thread")
extension Connection: Sendable {}
