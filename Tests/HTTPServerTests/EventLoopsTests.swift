import Foundation
import HTTP1
import HTTPServer
import ServiceRuntime
import Synchronization
import TestSupport
import Testing

/// Several event loops: connections spread over them, each loop's load counted, and the
/// process-wide limits kept across them.
@Suite struct EventLoopsTests {
    @Test func connectionsSpreadEvenlyAndEachLoopCountsItsRequests() throws {
        try withServer(EchoResponder(), configure: { $0.eventLoopCount = 3 }) { port, server in
            let clients = try (0..<30).map { _ in try HTTPTestClient(port: port) }
            for (index, client) in clients.enumerated() {
                #expect(try getStatus(client, "/\(index)") == 200)
            }
            // The acceptor gives each newcomer to the loop with fewest connections.
            let loops = server.statistics.loops
            #expect(loops.map(\.openConnections) == [10, 10, 10])
            #expect(loops.map(\.requests) == [10, 10, 10])
            #expect(server.statistics.openConnections == 30)

            // Keep-alive requests stay on their connection's loop.
            for client in clients.prefix(3) {
                #expect(try getStatus(client, "/again") == 200)
            }
            #expect(server.statistics.loops.map(\.requests).reduce(0, +) == 33)
            for client in clients { client.close() }
            #expect(eventually { server.statistics.loops.allSatisfy { $0.openConnections == 0 } })
        }
    }

    @Test func atTheLimitAnIdleConnectionOfAnotherLoopMakesRoom() throws {
        try withServer(EchoResponder(), configure: { $0.eventLoopCount = 2; $0.maxConnections = 2 }) { port, server in
            // The first goes to loop 0 and sends nothing (not idle); the second, to loop 1, is an
            // idle keep-alive connection once answered.
            let fresh = try HTTPTestClient(port: port)
            let idle = try HTTPTestClient(port: port)
            #expect(try getStatus(idle) == 200)
            #expect(server.statistics.loops.map(\.openConnections) == [1, 1])

            // A newcomer: loop 0, which accepts, has no idle connection; loop 1 closes its own.
            let (newcomerStatus, newcomers) = try connectUntilAnswered(port: port)
            defer { withExtendedLifetime(newcomers) {} }
            #expect(newcomerStatus == 200)
            #expect(idle.isClosedByServer())
            #expect(server.statistics.idleConnectionsClosedForRoom == 1)
            #expect(server.statistics.openConnections == 2)

            // The connection that was not idle is untouched.
            #expect(try getStatus(fresh) == 200)
        }
    }

    @Test func atTheLimitTheProcesssOldestIdleConnectionMakesRoomWhicheverLoopHasIt() throws {
        try withServer(EchoResponder(), configure: { $0.eventLoopCount = 2; $0.maxConnections = 3 }) { port, server in
            // Loop 0: a connection that sent nothing; loop 1: the oldest idle one; loop 0: a newer idle one.
            let fresh = try HTTPTestClient(port: port)
            let oldest = try HTTPTestClient(port: port)
            #expect(try getStatus(oldest) == 200)
            usleepMilliseconds(20)
            let newer = try HTTPTestClient(port: port)
            #expect(try getStatus(newer) == 200)
            #expect(server.statistics.loops.map(\.openConnections) == [2, 1])

            let (newcomerStatus, newcomers) = try connectUntilAnswered(port: port)
            defer { withExtendedLifetime(newcomers) {} }
            #expect(newcomerStatus == 200)
            // The acceptor's own loop had an idle connection too, but a newer one.
            #expect(oldest.isClosedByServer())
            #expect(try getStatus(newer) == 200)
            #expect(try getStatus(fresh) == 200)
            #expect(server.statistics.idleConnectionsClosedForRoom == 1)
        }
    }

    @Test func atTheLimitWithNoIdleConnectionOnAnyLoopTheNewcomerIsClosed() throws {
        try withServer(EchoResponder(), configure: { $0.eventLoopCount = 2; $0.maxConnections = 2 }) { port, server in
            // Neither has sent a request: neither is idle in the keep-alive sense.
            let first = try HTTPTestClient(port: port)
            let second = try HTTPTestClient(port: port)
            #expect(eventually { server.statistics.loops.map(\.openConnections) == [1, 1] })
            let refused = try HTTPTestClient(port: port)
            #expect(refused.isClosedByServer())
            #expect(server.statistics.openConnections == 2)
            #expect(server.statistics.idleConnectionsClosedForRoom == 0)
            for client in [first, second] {
                #expect(try getStatus(client) == 200)
            }
        }
    }

    @Test func theServersThreadsAreNamed() throws {
        try withServer(EchoResponder(), configure: { $0.eventLoopCount = 2; $0.workerCount = 2; $0.batchWorkerCount = 1 }) {
            _, _ in
            func threadNames() -> Set<String> {
                let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
                return Set(
                    tasks.compactMap { task in
                        try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)
                            .trimmingCharacters(in: .whitespacesAndNewlines)
                    })
            }
            // A loop names itself when its thread starts, which may be just after start() returns.
            let expected: Set = ["http-loop-0", "http-loop-1", "http-worker-0", "http-worker-1", "http-batch-0"]
            #expect(eventually { expected.isSubset(of: threadNames()) }, "\(threadNames().sorted())")
        }
    }

    @Test func theDefaultIsOneLoopPerUsableCPU() {
        let configuration = HTTPServerConfiguration()
        #expect(configuration.resolvedEventLoopCount == UsableProcessors.count)
        #expect(UsableProcessors.count >= 1)
        #expect(UsableProcessors.count <= ProcessInfo.processInfo.processorCount)
    }
}

/// Each loop has a lane of its own; a loop no lane worker serves sends its requests to the others.
@Suite struct LanePerLoopTests {
    @Test func eachLoopsRequestsGoToItsOwnLaneAndALooplessLaneToTheWorkers() throws {
        let responder = LaneResponder(workerCount: 2)
        // Two loops, one lane worker: it serves loop 0; loop 1 has no lane.
        try withServer(responder, configure: { $0.eventLoopCount = 2; $0.workerCount = 2; $0.batchWorkerCount = 1 }) {
            port, server in
            let onLoop0 = try HTTPTestClient(port: port)
            let onLoop1 = try HTTPTestClient(port: port)
            #expect(eventually { server.statistics.loops.map(\.openConnections) == [1, 1] })
            try onLoop0.send("GET /lane/hit/0 HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try onLoop0.readResponse().header("X-By") == "lane")
            try onLoop1.send("GET /lane/hit/1 HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try onLoop1.readResponse().header("X-By") == "alone")
            #expect(responder.laneBatches.withLock { $0 } == [["/lane/hit/0"]])
        }
    }

    @Test func twoLanesAnswerTheirLoopsRequestsAtOnce() throws {
        let responder = LaneResponder(workerCount: 1)
        // Loop 0's lane worker is held; loop 1's lane still answers.
        try withServer(responder, configure: { $0.eventLoopCount = 2; $0.workerCount = 1; $0.batchWorkerCount = 2 }) {
            port, server in
            let onLoop0 = try HTTPTestClient(port: port)
            let onLoop1 = try HTTPTestClient(port: port)
            #expect(eventually { server.statistics.loops.map(\.openConnections) == [1, 1] })
            try onLoop0.send("GET /lane/hold HTTP/1.1\r\nHost: a\r\n\r\n")
            responder.held.wait()
            try onLoop1.send("GET /lane/hit/1 HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try onLoop1.readResponse().header("X-By") == "lane")
            responder.release.signal()
            #expect(try onLoop0.readResponse().header("X-By") == "lane")
        }
    }
}
