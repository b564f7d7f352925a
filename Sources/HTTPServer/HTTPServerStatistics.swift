/// A snapshot of the server's load.
public struct HTTPServerStatistics: Sendable {
    public var openConnections: Int
    /// Requests waiting for a worker.
    public var queuedRequests: Int
    /// Workers running the responder right now.
    public var busyWorkers: Int
    /// The event streams' counters, when the server has streams.
    public var eventStreams: EventStreams.Statistics?
    /// Idle keep-alive connections closed to admit a new one at the connection limit.
    public var idleConnectionsClosedForRoom: Int
    /// Requests answered 503 without running because every queue was full.
    public var requestsRefusedAtCapacity: Int
    /// Each event loop's share, in loop order.
    public var loops: [EventLoopStatistics] = []

    public init(
        openConnections: Int, queuedRequests: Int, busyWorkers: Int, eventStreams: EventStreams.Statistics? = nil,
        idleConnectionsClosedForRoom: Int = 0, requestsRefusedAtCapacity: Int = 0, loops: [EventLoopStatistics] = []
    ) {
        self.loops = loops
        self.idleConnectionsClosedForRoom = idleConnectionsClosedForRoom
        self.requestsRefusedAtCapacity = requestsRefusedAtCapacity
        self.openConnections = openConnections
        self.queuedRequests = queuedRequests
        self.busyWorkers = busyWorkers
        self.eventStreams = eventStreams
    }
}

/// One event loop's load.
public struct EventLoopStatistics: Sendable {
    /// Connections the loop serves now, event streams included.
    public var openConnections: Int
    /// Requests the loop has read since the server started.
    public var requests: Int

    public init(openConnections: Int, requests: Int) {
        self.openConnections = openConnections
        self.requests = requests
    }
}
