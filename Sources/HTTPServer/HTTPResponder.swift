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
}
