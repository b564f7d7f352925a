public import HTTP1

/// A handler run on the server's fixed worker threads.
///
/// Each worker thread owns one `Worker` value (e.g. its own PostgreSQL and memcached connections,
/// which are not thread-safe). ``makeWorker(index:)`` and every ``respond(to:worker:)`` call for a
/// given worker run on that worker's own thread only, so `Worker` need not be `Sendable`.
/// `respond` may block (database, cache); the event loop is never blocked by it.
public protocol HTTPResponder: Sendable {
    associatedtype Worker
    /// Creates the per-thread state of worker `index` (0..<workerCount), on that worker's thread.
    /// - Throws: any error; ``HTTPServer/start()`` then fails with it.
    func makeWorker(index: Int) throws -> Worker
    /// Answers one request. Routing (404, 405) is the responder's job.
    func respond(to request: HTTPRequest, worker: Worker) -> HTTPResponse

    /// How many queued requests `worker` may take at once (at least 1). With more than one, the
    /// worker hands them to ``respond(to:worker:answer:)`` to share work among them.
    func batchLimit(worker: Worker) -> Int
    /// Answers those of several requests taken from the queue together that it can answer
    /// quickly, passing each answer to `answer` (with the request's position) as soon as it is
    /// ready: it is sent at once. Returns the positions of the requests it left: they go back
    /// to the front of the queue, each to be answered alone by ``respond(to:worker:)`` — so no
    /// request waits in a batch behind a slow one.
    func respond(to requests: [HTTPRequest], worker: Worker, answer: (Int, HTTPResponse) -> Void) -> [Int]

    /// Whether a request goes to the batch lane (``HTTPServerConfiguration/batchWorkerCount``):
    /// its workers take up to ``batchLaneLimit`` queued requests at once and hand them to
    /// ``respond(to:worker:answer:)``; what that leaves goes to the other workers, to be answered
    /// alone. Route there only requests a batch answers without blocking (say, cache hits), so
    /// the lane's few threads never wait on anything but the batch's shared round trip. Runs on
    /// the event loop's thread for every request: keep it cheap.
    func prefersBatchLane(_ request: HTTPRequest) -> Bool

    /// How many queued requests a worker of the batch lane takes at once.
    var batchLaneLimit: Int { get }

    /// Answers, in the batch lane, those of several requests it can answer without blocking, as
    /// ``respond(to:worker:answer:)`` does, and says what becomes of the others: each answered
    /// alone, or each group of ``BatchRemainder/together`` by one worker at once, with
    /// ``respond(together:worker:answer:)`` (say, misses loaded in one round trip).
    func respondInBatchLane(to requests: [HTTPRequest], worker: Worker, answer: (Int, HTTPResponse) -> Void)
        -> BatchRemainder

    /// Answers requests that a batch of the lane left to be answered together, on a worker
    /// outside the lane (it may block).
    func respond(together requests: [HTTPRequest], worker: Worker, answer: (Int, HTTPResponse) -> Void)

    /// Looks at the head of a request that has a body, on the event loop's thread, before the
    /// body is read and before `100 Continue`: a response returned here (a refusal such as 401 or
    /// 403) is sent at once, the body is never read, and the connection closes. Keep it cheap; it
    /// runs on the thread that serves every connection.
    func screen(head: HTTPRequest) -> HTTPResponse?
}

extension HTTPResponder {
    /// One request at a time.
    public func batchLimit(worker: Worker) -> Int { 1 }

    /// No request goes to the batch lane.
    public func prefersBatchLane(_ request: HTTPRequest) -> Bool { false }

    public var batchLaneLimit: Int { 64 }

    /// What ``respond(to:worker:answer:)`` leaves, each alone.
    public func respondInBatchLane(to requests: [HTTPRequest], worker: Worker, answer: (Int, HTTPResponse) -> Void)
        -> BatchRemainder
    {
        BatchRemainder(alone: respond(to: requests, worker: worker, answer: answer))
    }

    /// Each request alone.
    public func respond(together requests: [HTTPRequest], worker: Worker, answer: (Int, HTTPResponse) -> Void) {
        for (index, request) in requests.enumerated() { answer(index, respond(to: request, worker: worker)) }
    }

    /// Every head passes: bodies are read, requests go to the workers.
    public func screen(head: HTTPRequest) -> HTTPResponse? { nil }

    /// Every request, one by one, with ``respond(to:worker:)``.
    public func respond(to requests: [HTTPRequest], worker: Worker, answer: (Int, HTTPResponse) -> Void) -> [Int] {
        for (index, request) in requests.enumerated() { answer(index, respond(to: request, worker: worker)) }
        return []
    }
}

/// The requests a batch of the lane left (positions in the batch): the other workers answer
/// each of ``alone`` by itself, and each group of ``together`` at once, one worker per group.
public struct BatchRemainder: Sendable, Equatable {
    public var alone: [Int]
    /// Groups of positions (say, the reads that load together, and the writes made together):
    /// each group goes whole to one worker, the groups to different ones.
    public var together: [[Int]]

    public init(alone: [Int] = [], together: [[Int]] = []) {
        self.alone = alone
        self.together = together
    }
}
