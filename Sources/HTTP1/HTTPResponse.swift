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
        /// One topic the stream follows, and the position its first bytes bring the client to:
        /// only later events of the topic are sent.
        public struct Subscription: Sendable, Equatable {
            public var topic: Int64
            public var position: Int64
            /// Whether the stream gets the topic's events in their restricted form, where an
            /// event has one (`EventStreams.publish(topic:position:bytes:restrictedBytes:)`): a
            /// profile's owner gets the fields only the owner reads.
            public var receivesRestricted: Bool

            public init(topic: Int64, position: Int64, receivesRestricted: Bool = false) {
                self.topic = topic
                self.position = position
                self.receivesRestricted = receivesRestricted
            }
        }

        /// What the stream follows, for example profile ids: one topic, or many (a list's stream).
        public var subscriptions: [Subscription]
        /// Whether the end of a topic (`EventStreams.closeStreams`) ends the stream — a stream of
        /// one topic has nothing left to follow — or is written to it as an event of its own, so
        /// the stream of a list goes on with its other topics.
        public var endsWithTopic: Bool
        /// Who opened it, as counted against a per-client limit; the server gives the count back
        /// when the stream ends or is refused (`EventStreams.release(client:)`).
        public var client: String?
        /// When the server ends the stream (its lifetime, or the expiry of the token that opened
        /// it); the client reconnects with `Last-Event-ID` and misses nothing.
        public var endsAt: ContinuousClock.Instant?

        /// A stream of one topic, ended when the topic ends.
        public init(
            topic: Int64, position: Int64, receivesRestricted: Bool = false, client: String? = nil,
            endsAt: ContinuousClock.Instant? = nil
        ) {
            self.init(
                subscriptions: [Subscription(topic: topic, position: position, receivesRestricted: receivesRestricted)],
                endsWithTopic: true, client: client, endsAt: endsAt)
        }

        /// A stream of several topics (distinct), which outlives the end of any of them.
        public init(
            subscriptions: [Subscription], endsWithTopic: Bool = false, client: String? = nil,
            endsAt: ContinuousClock.Instant? = nil
        ) {
            self.subscriptions = subscriptions
            self.endsWithTopic = endsWithTopic
            self.client = client
            self.endsAt = endsAt
        }

        /// The topic of a stream of one.
        public var topic: Int64? { subscriptions.count == 1 ? subscriptions[0].topic : nil }
    }

    public init(status: HTTPStatus, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
