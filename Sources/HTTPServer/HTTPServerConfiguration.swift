import ServiceRuntime

/// Settings of an ``HTTPServer``, with production defaults.
public struct HTTPServerConfiguration: Sendable {
    /// IPv4 address to bind (`localhost` means `127.0.0.1`).
    public var host: String = "127.0.0.1"
    /// Port to bind; 0 picks an ephemeral port (see ``HTTPServer/start()``).
    public var port: Int = 8080
    /// Event loops (threads that read, parse and write the connections); `nil`: one per CPU the
    /// process may use (``ServiceRuntime/UsableProcessors``).
    public var eventLoopCount: Int? = nil
    /// Fixed number of worker threads running the responder (blocking work runs here).
    public var workerCount: Int = 16
    /// Worker threads that take only the requests the responder sends to the batch lane
    /// (``RequestClassification/accept(_:toBatchLane:)``), as many at once as are queued (up to
    /// ``batchLaneLimit``): requests that share one round trip (cache hits), kept apart from work
    /// that blocks. Spread over the event loops (worker `i` serves loop `i % eventLoops`'
    /// requests); a loop left without one sends its requests to the other workers. 0: no lane.
    public var batchWorkerCount: Int = 0
    /// The most requests a worker of the batch lane takes at once: one multi-get's worth.
    public var batchLaneLimit: Int = 64
    /// Requests waiting for a worker; when full the server answers 503 with `Retry-After: 1` at once.
    public var queueCapacity: Int = 1024
    /// `listen(2)` backlog.
    public var backlog: Int32 = 1024
    /// Open connections; further connections are accepted and closed at once.
    public var maxConnections: Int = 10_000
    /// Longest request line (414): room for a list's stream of 1,000 ids, each with a floor
    /// (`GET /users/profiles/events?ids=…`, 31 KB at the longest).
    public var maxRequestLineBytes: Int = 32 * 1024
    /// Largest header block (431); also bounds chunked trailers.
    public var maxHeaderBytes: Int = 16 * 1024
    /// Most header fields (431).
    public var maxHeaderCount: Int = 100
    /// Largest request body (413, answered without reading the body).
    public var maxBodyBytes: Int = 64 * 1024
    /// Time from the first byte of a request (or from accepting the connection) to the end of its head.
    public var headDeadline: Duration = .seconds(10)
    /// Time from the end of the head to the end of the body.
    public var bodyDeadline: Duration = .seconds(10)
    /// Idle time allowed between keep-alive requests; longer than nginx's 60 s upstream keep-alive.
    public var idleTimeout: Duration = .seconds(75)
    /// Time to write one response.
    public var writeDeadline: Duration = .seconds(10)
    /// On shutdown, time given to in-flight requests before the remaining connections are closed.
    public var drainTimeout: Duration = .seconds(10)

    public init() {}

    /// ``eventLoopCount``, or one per usable CPU.
    public var resolvedEventLoopCount: Int {
        max(eventLoopCount ?? UsableProcessors.count, 1)
    }
}
