/// A response: status, header fields and body.
///
/// The server adds `Date`, `Content-Length` and, when it closes the connection, `Connection: close`;
/// any `Content-Length`, `Transfer-Encoding`, `Date` or `Connection` set here is replaced.
public struct HTTPResponse: Sendable {
    public var status: HTTPStatus
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// Set when the response opens an event stream: `body` is its first bytes, no `Content-Length`
    /// is sent, the body ends when the connection closes, and the server keeps the connection open
    /// to write later events of ``EventStream/topic``.
    public var eventStream: EventStream?

    /// Where an event-stream response subscribes (Server-Sent Events, docs/design.md §4).
    public struct EventStream: Sendable, Equatable {
        /// What the stream follows, for example a profile id.
        public var topic: Int64
        /// The position the first bytes bring the client to: only later events are sent.
        public var position: Int64
        /// Who opened it, as counted against a per-client limit; the server gives the count back
        /// when the stream ends or is refused (`EventStreams.release(client:)`).
        public var client: String?
        /// When the server ends the stream (its lifetime, or the expiry of the token that opened
        /// it); the client reconnects with `Last-Event-ID` and misses nothing.
        public var endsAt: ContinuousClock.Instant?

        public init(topic: Int64, position: Int64, client: String? = nil, endsAt: ContinuousClock.Instant? = nil) {
            self.topic = topic
            self.position = position
            self.client = client
            self.endsAt = endsAt
        }
    }

    public init(status: HTTPStatus, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
