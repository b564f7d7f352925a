public import HTTP1

/// A handler run on the server's fixed worker threads.
///
/// Each worker thread owns one `Worker` value (e.g. its own PostgreSQL and memcached connections,
/// which are not thread-safe). ``makeWorker(index:)`` and every ``respond(to:from:worker:answer:)``
/// call for a given worker run on that worker's own thread only, so `Worker` need not be
/// `Sendable`. `respond` may block (database, cache); the event loop is never blocked by it.
///
/// A request is classified once, on its event loop, when its head is parsed
/// (``classify(head:bodyFollows:)``): what the responder makes of it there travels with it to
/// the worker, so nothing is parsed twice. Workers take requests in batches — one request is a
/// batch of one — and a batch may hand some of its requests on, typed, to other workers.
public protocol HTTPResponder: Sendable {
    associatedtype Worker
    /// What the responder makes of a request's head (its route, what was parsed of it): decided
    /// once by ``classify(head:bodyFollows:)`` and carried with the request.
    associatedtype Classified: Sendable

    /// Creates the per-thread state of worker `index`, on that worker's thread.
    /// - Throws: any error; ``HTTPServer/start()`` then fails with it.
    func makeWorker(index: Int) throws -> Worker

    /// What a request is, decided once, on the event loop's thread, when its head is parsed:
    /// before its body is read when one follows (`bodyFollows`). A refusal is sent at once, the
    /// body is never read (nor `100 Continue` sent), and the connection closes. Keep it cheap:
    /// it runs on the thread that serves every connection of its loop.
    func classify(head: HTTPRequest, bodyFollows: Bool) -> RequestClassification<Classified>

    /// How many queued requests `worker` takes at once (at least 1). The batch lane's workers
    /// take up to ``HTTPServerConfiguration/batchLaneLimit``.
    func batchLimit(worker: Worker) -> Int

    /// Answers a batch of requests, passing each answer to `answer` as soon as it is ready (it is
    /// sent at once), and returns the requests it hands on, in groups: each group goes whole to
    /// one other worker, as a batch ``BatchOrigin/handedOn`` (a group of one is a request to be
    /// answered alone), with the `classified` value the batch left in it. A batch handed on must
    /// answer every request: one it returns is answered 500.
    func respond(
        to batch: [BatchedRequest<Classified>], from origin: BatchOrigin, worker: Worker,
        answer: (BatchedRequest<Classified>, HTTPResponse) -> Void
    ) -> [[BatchedRequest<Classified>]]
}

extension HTTPResponder {
    /// One request at a time.
    public func batchLimit(worker: Worker) -> Int { 1 }
}

/// What ``HTTPResponder/classify(head:bodyFollows:)`` decides of a request.
public enum RequestClassification<Classified: Sendable>: Sendable {
    /// The request goes on to a worker with `classified` — to the loop's batch lane when
    /// `toBatchLane` and a lane worker serves the loop (say, reads a multi-get answers: the lane
    /// never waits on anything but a batch's shared round trip), else to the other workers.
    case accept(Classified, toBatchLane: Bool)
    /// Answered at once on the loop; the connection closes after it.
    case refuse(HTTPResponse)
}

/// Where a batch comes from, which says what the responder may do with it.
public enum BatchOrigin: Sendable, Equatable {
    /// Taken by a worker of the batch lane: answer what needs no wait but the batch's shared
    /// round trip and hand the rest on.
    case lane
    /// Taken from the queue by a worker (one request, or up to its batch limit): it may block,
    /// but what it leaves waiting behind a slow request should be handed on.
    case queue
    /// Handed on by another batch: every request is answered here.
    case handedOn
}

/// A request in a batch: the whole request, body included, and what the responder made of it.
///
/// It also carries, for the server, the connection it came on: the responder answers it, or
/// hands it on, as the value it was given, in any order and any grouping, and the answer still
/// goes to its own connection.
public struct BatchedRequest<Classified: Sendable>: Sendable {
    public let request: HTTPRequest
    /// Where its answer goes; nil for one the server did not receive, whose answer goes nowhere.
    /// Ahead of `classified`, whose size depends on its type, so that its offset does not.
    let connection: ConnectionTicket?
    /// What ``HTTPResponder/classify(head:bodyFollows:)`` made of it, or what a batch that
    /// handed it on left in it (say, its body parsed).
    public var classified: Classified

    /// A request no server received (a test's): an answer to it goes nowhere.
    public init(request: HTTPRequest, classified: Classified) {
        self.init(request: request, classified: classified, connection: nil)
    }

    init(request: HTTPRequest, classified: Classified, connection: ConnectionTicket?) {
        self.request = request
        self.classified = classified
        self.connection = connection
    }
}

/// A responder that answers each request by itself: nothing to classify, no batches.
public protocol SingleRequestResponder: HTTPResponder where Classified == Void {
    /// Answers one request. Routing (404, 405) is the responder's job.
    func respond(to request: HTTPRequest, worker: Worker) -> HTTPResponse
}

extension SingleRequestResponder {
    public func classify(head: HTTPRequest, bodyFollows: Bool) -> RequestClassification<Void> {
        .accept((), toBatchLane: false)
    }

    public func respond(
        to batch: [BatchedRequest<Void>], from origin: BatchOrigin, worker: Worker,
        answer: (BatchedRequest<Void>, HTTPResponse) -> Void
    ) -> [[BatchedRequest<Void>]] {
        for member in batch { answer(member, respond(to: member.request, worker: worker)) }
        return []
    }
}
