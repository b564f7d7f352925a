import Dispatch
import HTTP1
import HTTPServer
import Synchronization
import TestSupport
import Testing

/// Sends `/lane/…` paths to the batch lane. In the lane, `/lane/hit/…` is answered, `/lane/miss/…`
/// and `/lane/write/…` are left to be answered together (a group each) and `/lane/other/…` alone. Records which thread kind answered
/// what, and the groups answered together. `/lane/hold` holds the lane's worker until released.
final class LaneResponder: HTTPResponder {
    struct Worker { let inLane: Bool }
    let workerCount: Int
    let laneBatches = Mutex<[[String]]>([])
    let groups = Mutex<[[String]]>([])
    let answeredAlone = Mutex<[String]>([])
    let held = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)

    init(workerCount: Int) { self.workerCount = workerCount }

    func makeWorker(index: Int) throws -> Worker { Worker(inLane: index >= workerCount) }

    func classify(head: HTTPRequest, bodyFollows: Bool) -> RequestClassification<Void> {
        .accept((), toBatchLane: head.path.hasPrefix("/lane/"))
    }

    func respond(
        to batch: [BatchedRequest<Void>], from origin: BatchOrigin, worker: Worker,
        answer: (BatchedRequest<Void>, HTTPResponse) -> Void
    ) -> [[BatchedRequest<Void>]] {
        guard origin == .lane else {
            #expect(!worker.inLane, "the lane answers only its own batches")
            if batch.count > 1 {
                groups.withLock { $0.append(batch.map(\.request.path)) }
                for member in batch { answer(member, Self.answer(member.request, by: "together")) }
            } else {
                for member in batch {
                    answeredAlone.withLock { $0.append(member.request.path) }
                    answer(member, Self.answer(member.request, by: "alone"))
                }
            }
            return []
        }
        #expect(worker.inLane)
        laneBatches.withLock { $0.append(batch.map(\.request.path)) }
        var misses: [BatchedRequest<Void>] = []
        var writes: [BatchedRequest<Void>] = []
        var handedOn: [[BatchedRequest<Void>]] = []
        for member in batch {
            let path = member.request.path
            if path == "/lane/hold" {
                held.signal()
                release.wait()
                answer(member, Self.answer(member.request, by: "lane"))
            } else if path.hasPrefix("/lane/miss/") {
                misses.append(member)
            } else if path.hasPrefix("/lane/write/") {
                writes.append(member)
            } else if path.hasPrefix("/lane/other/") {
                handedOn.append([member])
            } else {
                answer(member, Self.answer(member.request, by: "lane"))
            }
        }
        return handedOn + [misses, writes].filter { !$0.isEmpty }
    }

    static func answer(_ request: HTTPRequest, by: String) -> HTTPResponse {
        HTTPResponse(status: .ok, headers: ["X-Path": request.path, "X-By": by], body: Array(request.path.utf8))
    }
}

@Suite struct BatchLaneTests {
    /// The lane's one worker held; requests queue in the lane; released, it takes them as one
    /// batch: hits answered there, misses and writes handed on as a group each, the rest alone.
    @Test func aBatchAnswersItsHitsAndHandsOnItsMissesTogetherAndTheRestAlone() throws {
        let responder = LaneResponder(workerCount: 2)
        try withServer(responder, configure: { $0.workerCount = 2; $0.batchWorkerCount = 1; $0.eventLoopCount = 1 }) { port, server in
            let holder = try HTTPTestClient(port: port)
            try holder.send("GET /lane/hold HTTP/1.1\r\nHost: a\r\n\r\n")
            responder.held.wait()
            let paths = [
                "/lane/hit/1", "/lane/miss/2", "/lane/write/7", "/lane/other/3", "/lane/miss/4", "/lane/hit/5", "/lane/miss/6",
                "/lane/write/8",
            ]
            let clients = try paths.map { path in
                let client = try HTTPTestClient(port: port)
                try client.send("GET \(path) HTTP/1.1\r\nHost: a\r\n\r\n")
                return client
            }
            #expect(eventually { server.statistics.queuedRequests == paths.count })
            responder.release.signal()
            #expect(try holder.readResponse().header("X-By") == "lane")
            var answeredBy: [String: String] = [:]
            for (client, path) in zip(clients, paths) {
                let response = try client.readResponse()
                #expect(response.status == 200)
                #expect(response.header("X-Path") == path, "each answer reaches the connection that asked")
                answeredBy[path] = response.header("X-By")
            }
            #expect(answeredBy["/lane/hit/1"] == "lane" && answeredBy["/lane/hit/5"] == "lane")
            #expect(answeredBy["/lane/other/3"] == "alone")
            #expect(["/lane/miss/2", "/lane/miss/4", "/lane/miss/6"].allSatisfy { answeredBy[$0] == "together" })
            #expect(["/lane/write/7", "/lane/write/8"].allSatisfy { answeredBy[$0] == "together" })
            #expect(responder.laneBatches.withLock { $0 } == [["/lane/hold"], paths])
            #expect(
                Set(responder.groups.withLock { $0 }) == [["/lane/miss/2", "/lane/miss/4", "/lane/miss/6"], ["/lane/write/7", "/lane/write/8"]],
                "each group whole, apart from the other")
        }
    }

    /// Requests the responder does not route to the lane never reach it, and a held lane does
    /// not hold them: the other workers answer them meanwhile.
    @Test func otherRequestsBypassTheLaneEvenWhileItIsBusy() throws {
        let responder = LaneResponder(workerCount: 1)
        try withServer(responder, configure: { $0.workerCount = 1; $0.batchWorkerCount = 1 }) { port, _ in
            let holder = try HTTPTestClient(port: port)
            try holder.send("GET /lane/hold HTTP/1.1\r\nHost: a\r\n\r\n")
            responder.held.wait()
            let client = try HTTPTestClient(port: port)
            try client.send("GET /write HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try client.readResponse().header("X-By") == "alone")
            responder.release.signal()
            #expect(try holder.readResponse().header("X-By") == "lane")
            #expect(responder.laneBatches.withLock { $0 } == [["/lane/hold"]])
        }
    }

    /// Without batch workers, every request goes to the others, lane-worthy or not.
    @Test func withoutBatchWorkersEveryRequestIsAnsweredAlone() throws {
        let responder = LaneResponder(workerCount: 2)
        try withServer(responder, configure: { $0.workerCount = 2 }) { port, _ in
            let client = try HTTPTestClient(port: port)
            try client.send("GET /lane/hit/1 HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try client.readResponse().header("X-By") == "alone")
            #expect(responder.laneBatches.withLock { $0 }.isEmpty)
        }
    }
}
