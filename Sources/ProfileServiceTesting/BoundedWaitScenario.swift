import HTTPServer
public import Logging
public import ProfileService
import Testing
import TestSupport

extension CacheProtocolScenarios {
    /// A slow PostgreSQL read of one hot id in the service stack (HTTP server, 4 workers; the
    /// leader's read held by a hook, an injected fault): two readers of the id may wait, for at
    /// most the coalesced wait, the rest are refused at once, and unrelated reads are all served
    /// meanwhile — the hot id never holds every worker (docs/design.md §5.3).
    ///
    /// - Parameter makeWorker: a worker of `Backends`' kind on `shared` (the one cache state the
    ///   scenario installs its hook and bounds in).
    public static func aSlowReadOfOneHotIDNeverHoldsEveryWorker<Backends: RepositoryBackends>(
        _ backends: Backends.Type,
        makeWorker: @escaping @Sendable (ProfileCacheShared, Logger) throws -> ProfileWorker
    ) throws {
        let seeding = try Backends()
        let hot = try seeding.seed()
        let others = try (0..<20).map { _ in try seeding.seed() }
        let gate = ReaderGate()
        gate.arm(hot.id)
        var configuration = ProfileCacheConfiguration()
        configuration.coalescedWait = .seconds(1)
        configuration.maximumCoalescedWaiters = 2
        let shared = ProfileCacheShared(
            configuration: configuration, hooks: .init(afterDatabaseRead: { gate.pause($0) }))
        var logger = Logger(label: "BoundedWait")
        logger.logLevel = .warning
        let responder = ProfileResponder(
            lifecycle: ServiceLifecycle(), authorization: .disabled, observability: .init(accessLog: nil),
            logger: logger
        ) { [logger] _ in try makeWorker(shared, logger) }
        var serverConfiguration = HTTPServerConfiguration()
        serverConfiguration.port = 0
        serverConfiguration.workerCount = 4
        serverConfiguration.queueCapacity = 64
        let server = HTTPServer(configuration: serverConfiguration, responder: responder, logger: logger)
        let port = try server.start()
        var released = false
        defer {
            if !released { gate.release() }
            server.shutdown()
            server.waitUntilStopped()
        }
        func get(_ id: Int64, on client: HTTPTestClient) throws {
            try client.send("GET /users/profile/\(id) HTTP/1.1\r\nHost: test\r\n\r\n")
        }

        // The leader's read of the hot id is held after PostgreSQL answered: one worker busy.
        let leader = try HTTPTestClient(port: port)
        try get(hot.id, on: leader)
        gate.waitUntilPaused()
        // Eight more readers of the hot id: two may wait (for at most 1 s), six are refused at once.
        let followers = try (0..<8).map { _ in try HTTPTestClient(port: port) }
        for client in followers { try get(hot.id, on: client) }
        // Unrelated reads are all served while the leader is still held.
        let unrelated = try HTTPTestClient(port: port)
        for profile in others {
            try get(profile.id, on: unrelated)
            let response = try unrelated.readResponse()
            #expect(response.status == 200, "an unrelated read answered \(response.status)")
        }
        let statuses = try followers.map { try $0.readResponse() }.map(\.status)
        #expect(statuses == Array(repeating: 503, count: 8))
        #expect(shared.statistics.count(.coalescedWaitRefused) == 6)
        #expect(shared.statistics.count(.coalescedWaitExpired) == 2)

        gate.release()
        released = true
        #expect(try leader.readResponse().status == 200)
    }
}
