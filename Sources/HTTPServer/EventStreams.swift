import Synchronization

/// The server's event streams (Server-Sent Events): who follows which topic, and the events
/// published to them. Shared by the responder's workers, publishers on any thread, and the event
/// loop, which owns the stream connections themselves (docs/design.md §4).
///
/// A stream is opened in three steps:
/// 1. a worker calls ``retain(topic:)`` *before* it reads the state it sends first;
/// 2. it answers with an ``HTTP1/HTTPResponse/eventStream`` response whose `position` is that state's;
/// 3. the event loop registers the connection and sends it, after the first bytes, the topic's
///    latest published event if that is newer than `position`.
///
/// From step 1 the topic is watched, so an event published while the worker reads is kept as the
/// topic's latest and reaches the new stream in step 3: nothing falls between the read and the
/// registration. The server releases the reference when the stream closes or is refused; a worker
/// that answers anything else must call ``release(topic:)`` itself.
///
/// A stream follows one topic or several (a list's stream); each of its topics is retained and
/// released the same way.
///
/// Events go out in position order per connection and topic: one older than what a connection
/// has is skipped. The end of a topic (``closeStreams(topic:position:bytes:)``) at position `p`
/// ranks after an event at `p` and before one at `p + 1`: a profile deleted at version 7 and
/// created again at 8.
public final class EventStreams: Sendable {
    /// Limits and timing of the streams.
    public struct Configuration: Sendable {
        /// Open streams at most; beyond, a new stream is answered 503 with `Retry-After`. Well
        /// below the connection limit, so streams always leave room for other requests.
        public var maxSubscribers: Int = 5_000
        /// Topics followed by all open streams together (a stream of one profile follows one, a
        /// list's stream up to 1,000); beyond, a new stream is answered 503 like the limit above.
        /// Bounds the memory of the fan-out: about 150 bytes per subscription.
        public var maxSubscriptions: Int = 500_000
        /// Open streams of one client at most (see ``reserve(client:)``); 0 for no limit.
        public var maxSubscribersPerClient: Int = 32
        /// Longest a stream stays open; the server then ends it and the client resumes with
        /// `Last-Event-ID`, so a client's streams (and what it was allowed when it opened them)
        /// are looked at again. Each stream gets this minus up to 10 %, so reconnections spread.
        public var maxLifetime: Duration? = .seconds(3600)
        /// A comment line is sent to every stream this often, so proxies and clients see it alive.
        public var heartbeatInterval: Duration = .seconds(15)
        /// Bytes waiting for a stream that does not read, beyond the socket's buffer; a stream
        /// whose events would exceed it is cut (the client reconnects and resumes).
        public var maxBufferedBytes: Int = 64 * 1024
        /// `SO_SNDBUF` of a stream socket: a quiet stream needs little, and a small kernel buffer
        /// lets a stalled reader be found (and cut) after a bounded amount of data.
        public var socketSendBufferBytes: Int = 16 * 1024
        /// Seconds `Retry-After` suggests when the subscriber limit is reached.
        public var retryAfterSeconds: Int = 5

        public init() {}
    }

    /// Counters of the streams, for metrics.
    public struct Statistics: Sendable {
        /// Streams open now.
        public var subscribers: Int
        /// Topics followed by the open streams together.
        public var subscriptions: Int = 0
        /// Events written to streams (one per stream and event), heartbeats not counted.
        public var eventsSent: Int
        /// Streams closed because their reader fell behind by more than ``Configuration/maxBufferedBytes``.
        public var subscribersCutAsSlow: Int
        /// Streams refused by ``Configuration/maxSubscribers``.
        public var subscribersRefused: Int
        /// Streams refused by ``Configuration/maxSubscribersPerClient`` (429).
        public var subscribersRefusedPerClient: Int = 0
        /// Streams the server ended on time (their lifetime, or their token expired).
        public var subscribersEnded: Int = 0
    }

    struct Topic {
        /// Workers opening a stream of this topic plus streams open on it.
        var holders = 0
        /// The newest event published while the topic was watched.
        var latest: Event?
    }

    struct Event: Sendable {
        var topic: Int64
        var position: Int64
        /// What is written to the topic's streams; for the end of a topic, what a stream that
        /// outlives it gets (``HTTP1/HTTPResponse/EventStream/endsWithTopic``).
        var bytes: [UInt8]
        /// What streams that receive restricted forms get instead of ``bytes``; nil: ``bytes``.
        var restrictedBytes: [UInt8]? = nil
        /// Ends the topic: streams of it alone are closed instead of written to.
        var closesStreams = false

        /// The event's bytes for a stream that does, or does not, receive restricted forms.
        func bytes(restricted: Bool) -> [UInt8] {
            restricted ? restrictedBytes ?? bytes : bytes
        }

        /// The event's place in its topic's order: the end of a topic at `p` comes after an
        /// event at `p` (the deleted profile's last version) and before one at `p + 1`.
        var rank: Int64 { Self.rank(position: position, closesStreams: closesStreams) }

        static func rank(position: Int64, closesStreams: Bool = false) -> Int64 {
            position >= Int64.max / 2 ? .max : position * 2 + (closesStreams ? 1 : 0)
        }
    }

    /// The published events not yet taken, one list per event loop (each loop writes its own
    /// streams), with each loop's eventfd while the server runs.
    private struct Outbox {
        var events: [[Event]] = [[]]
        var wakeFDs: [Int32] = []
    }

    public let configuration: Configuration
    private let topics = Mutex<[Int64: Topic]>([:])
    /// How many topics `topics` holds, kept under its lock: every write asks whether its profile
    /// is watched, and while nothing is (the usual case) the answer costs no lock.
    private let watchedTopicCount = Atomic<Int>(0)
    private let outbox = Mutex(Outbox())
    /// Open (or opening) streams per client, for ``Configuration/maxSubscribersPerClient``.
    private let clients = Mutex<[String: Int]>([:])
    let subscribers = Atomic<Int>(0)
    let subscriptions = Atomic<Int>(0)
    let eventsSent = Atomic<Int>(0)
    let cutAsSlow = Atomic<Int>(0)
    let refused = Atomic<Int>(0)
    let refusedPerClient = Atomic<Int>(0)
    let ended = Atomic<Int>(0)

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Marks `topic` as watched by one more holder (see the type's steps).
    public func retain(topic: Int64) {
        topics.withLock { topics in
            topics[topic, default: Topic()].holders += 1
            watchedTopicCount.store(topics.count, ordering: .releasing)
        }
    }

    /// Marks each of `topics` (distinct) as watched by one more holder: a list's stream.
    public func retain(topics list: [Int64]) {
        topics.withLock { topics in
            for topic in list { topics[topic, default: Topic()].holders += 1 }
            watchedTopicCount.store(topics.count, ordering: .releasing)
        }
    }

    /// Counts one more stream of `client` (a token's subject, or a client address) if it has
    /// fewer than ``Configuration/maxSubscribersPerClient`` open; a worker calls it before it
    /// opens a stream and answers 429 when it returns false. The server gives the place back
    /// when the stream ends or is refused; a worker that answers anything else calls
    /// ``release(topic:client:)``.
    public func reserve(client: String) -> Bool {
        let limit = configuration.maxSubscribersPerClient
        let reserved = clients.withLock { clients -> Bool in
            let open = clients[client, default: 0]
            guard limit == 0 || open < limit else { return false }
            clients[client] = open + 1
            return true
        }
        if !reserved { refusedPerClient.add(1, ordering: .relaxed) }
        return reserved
    }

    /// Open streams of `client` now.
    public func openStreams(client: String) -> Int {
        clients.withLock { $0[client, default: 0] }
    }

    /// Drops one holder of `topic` and, when given, one stream of `client`.
    public func release(topic: Int64, client: String?) {
        release(topics: [topic], client: client)
    }

    /// Drops one holder of each of `topics` and, when given, one stream of `client`.
    public func release(topics list: [Int64], client: String?) {
        topics.withLock { topics in
            for topic in list { release(topic, in: &topics) }
        }
        guard let client else { return }
        clients.withLock { clients in
            guard let open = clients[client] else { return }
            clients[client] = open > 1 ? open - 1 : nil
        }
    }

    /// Drops one holder of `topic`; the topic and its latest event are forgotten with the last one.
    public func release(topic: Int64) {
        topics.withLock { release(topic, in: &$0) }
    }

    private func release(_ topic: Int64, in topics: inout [Int64: Topic]) {
        guard var entry = topics[topic] else { return }
        entry.holders -= 1
        topics[topic] = entry.holders > 0 ? entry : nil
        watchedTopicCount.store(topics.count, ordering: .releasing)
    }

    /// Whether anyone follows `topic` (or is about to).
    public func isWatched(topic: Int64) -> Bool {
        guard watchedTopicCount.load(ordering: .acquiring) > 0 else { return false }
        return topics.withLock { $0[topic] != nil }
    }

    /// The position of the newest event published to `topic` while watched, if any.
    public func latestPosition(topic: Int64) -> Int64? {
        topics.withLock { $0[topic]?.latest?.position }
    }

    /// Every watched topic, for a resynchronisation.
    public var watchedTopics: [Int64] {
        topics.withLock { Array($0.keys) }
    }

    /// Sends `bytes` (complete events) to every stream of `topic` that is behind `position` —
    /// `restrictedBytes` instead, when given, to the streams that receive restricted forms.
    /// Callable from any thread; does nothing when nobody watches `topic` or a newer event of it
    /// was published already.
    /// - Returns: whether the event was queued for the streams.
    @discardableResult
    public func publish(topic: Int64, position: Int64, bytes: [UInt8], restrictedBytes: [UInt8]? = nil) -> Bool {
        send(Event(topic: topic, position: position, bytes: bytes, restrictedBytes: restrictedBytes))
    }

    /// Keeps `event` as its topic's latest and queues it for the loop, unless nobody watches the
    /// topic or its latest event ranks at or after this one.
    @discardableResult
    private func send(_ event: Event) -> Bool {
        let accepted = topics.withLock { topics -> Bool in
            guard var entry = topics[event.topic] else { return false }
            if let latest = entry.latest, latest.rank >= event.rank { return false }
            entry.latest = event
            topics[event.topic] = entry
            return true
        }
        if accepted { enqueue(event) }
        return accepted
    }

    private func enqueue(_ event: Event) {
        outbox.withLock { outbox in
            for loop in outbox.events.indices {
                outbox.events[loop].append(event)
                // One wake-up per batch; signalled under the lock so the descriptor cannot be closed meanwhile.
                if outbox.events[loop].count == 1, loop < outbox.wakeFDs.count {
                    System.eventfdSignal(outbox.wakeFDs[loop])
                }
            }
        }
    }

    /// Ends `topic` (what it follows is gone, say a deleted profile): every stream of it gets
    /// `bytes` (the event that says so); streams of that topic alone then end, streams of several
    /// go on. Callable from any thread.
    ///
    /// `position` is the last one the topic had (a deleted profile's last version): an event
    /// published later at or below it is dropped, one above it (the profile created again) goes
    /// out. Without it, the topic's end is final while it is watched.
    ///
    /// Kept as the topic's latest event while it is watched, like any event: a stream a worker is
    /// opening right now (it retained the topic and read the profile before it was deleted) is
    /// closed as soon as the loop registers it, instead of staying open on what is gone.
    public func closeStreams(topic: Int64, position: Int64 = .max, bytes: [UInt8] = []) {
        send(Event(topic: topic, position: position, bytes: bytes, closesStreams: true))
    }

    public var statistics: Statistics {
        Statistics(
            subscribers: subscribers.load(ordering: .relaxed),
            subscriptions: subscriptions.load(ordering: .relaxed), eventsSent: eventsSent.load(ordering: .relaxed),
            subscribersCutAsSlow: cutAsSlow.load(ordering: .relaxed),
            subscribersRefused: refused.load(ordering: .relaxed),
            subscribersRefusedPerClient: refusedPerClient.load(ordering: .relaxed),
            subscribersEnded: ended.load(ordering: .relaxed))
    }

    // MARK: Event loop side

    /// The newest event of `topic`, for a stream being registered.
    func latestEvent(topic: Int64) -> Event? {
        topics.withLock { $0[topic]?.latest }
    }

    /// Connects the outbox to the event loops' eventfds, one list of events per loop (none when
    /// the loops stop: events then wait in one list, as before the server started).
    func attach(wakeFDs: [Int32]) {
        outbox.withLock { outbox in
            let waiting = outbox.events[0]
            outbox.events = Array(repeating: waiting, count: max(wakeFDs.count, 1))
            outbox.wakeFDs = wakeFDs
        }
    }

    /// Moves the events published for loop `loop` into `buffer`, oldest first.
    func takeEvents(loop: Int, into buffer: inout [Event]) {
        outbox.withLock { outbox in
            guard loop < outbox.events.count, !outbox.events[loop].isEmpty else { return }
            swap(&outbox.events[loop], &buffer)
        }
    }
}
