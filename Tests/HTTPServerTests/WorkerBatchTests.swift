import Dispatch
import HTTP1
import HTTPServer
import Synchronization
import TestSupport
import Testing

/// Takes up to 8 queued requests at once and records each batch's size; leaves paths under
/// `/left/` for later and records the requests answered alone. `/block` holds its worker until
/// released; `/after-first` waits until the test has read the batch's first answer.
final class BatchingResponder: HTTPResponder {
    let batchSizes = Mutex<[Int]>([])
    let answeredAlone = Mutex<[String]>([])
    let blocked = DispatchSemaphore(value: 0)
    let unblock = DispatchSemaphore(value: 0)
    let firstAnswerRead = DispatchSemaphore(value: 0)

    func makeWorker(index: Int) throws {}
    func batchLimit(worker: Void) -> Int { 8 }

    func classify(head: HTTPRequest, bodyFollows: Bool) -> RequestClassification<Void> {
        .accept((), toBatchLane: false)
    }

    func respond(
        to batch: [BatchedRequest<Void>], from origin: BatchOrigin, worker: Void, answer: (BatchedRequest<Void>, HTTPResponse) -> Void
    ) -> [[BatchedRequest<Void>]] {
        guard origin == .queue, batch.count > 1 else {
            // Taken by itself, or handed on by a batch.
            for member in batch {
                answeredAlone.withLock { $0.append(member.request.path) }
                answer(member, self.answer(member.request))
            }
            return []
        }
        batchSizes.withLock { $0.append(batch.count) }
        var handedOn: [[BatchedRequest<Void>]] = []
        for member in batch {
            if member.request.path.hasPrefix("/left/") { handedOn.append([member]) } else { answer(member, self.answer(member.request)) }
        }
        return handedOn
    }

    private func answer(_ request: HTTPRequest) -> HTTPResponse {
        switch request.path {
        case "/block":
            blocked.signal()
            unblock.wait()
        case "/after-first":
            if firstAnswerRead.wait(timeout: .now() + 5) == .timedOut {
                return HTTPResponse(status: .internalServerError, body: Array("first answer was not sent".utf8))
            }
        default:
            break
        }
        return HTTPResponse(status: .ok, headers: ["X-Path": request.path], body: Array(request.path.utf8))
    }
}

@Suite struct WorkerBatchTests {
    /// One worker, held; five requests queue behind it; released, it takes them as one batch,
    /// and each answer reaches the connection that asked.
    private func queueFive(
        behind responder: BatchingResponder, port: Int, server: HTTPServer<BatchingResponder>, paths: [String]
    ) throws -> (HTTPTestClient, [HTTPTestClient]) {
        let holder = try HTTPTestClient(port: port)
        try holder.send("GET /block HTTP/1.1\r\nHost: a\r\n\r\n")
        responder.blocked.wait()
        let clients = try paths.map { path in
            let client = try HTTPTestClient(port: port)
            try client.send("GET \(path) HTTP/1.1\r\nHost: a\r\n\r\n")
            return client
        }
        #expect(eventually { server.statistics.queuedRequests == paths.count })
        responder.unblock.signal()
        #expect(try holder.readResponse().header("X-Path") == "/block")
        return (holder, clients)
    }

    @Test func queuedRequestsAreTakenTogetherAndAnsweredToTheirOwnConnections() throws {
        let responder = BatchingResponder()
        try withServer(responder, configure: { $0.workerCount = 1; $0.eventLoopCount = 1 }) { port, server in
            let paths = (0..<5).map { "/r\($0)" }
            let (_, clients) = try queueFive(behind: responder, port: port, server: server, paths: paths)
            for (client, path) in zip(clients, paths) {
                let response = try client.readResponse()
                #expect(response.status == 200)
                #expect(response.header("X-Path") == path)
            }
            #expect(responder.batchSizes.withLock { $0 } == [5], "the held request came alone; the five together")
            #expect(responder.answeredAlone.withLock { $0 } == ["/block"])
            // Keep-alive goes on after a batch: the connections are the loop's again.
            try clients[2].send("GET /again HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try clients[2].readResponse().header("X-Path") == "/again")
        }
    }

    @Test func eachAnswerOfABatchIsSentAsSoonAsItIsReady() throws {
        let responder = BatchingResponder()
        try withServer(responder, configure: { $0.workerCount = 1; $0.eventLoopCount = 1 }) { port, server in
            let paths = ["/first", "/after-first", "/r2", "/r3", "/r4"]
            let (_, clients) = try queueFive(behind: responder, port: port, server: server, paths: paths)
            // The batch's second request waits for this read: were answers held to the batch's
            // end, it would time out and answer 500.
            #expect(try clients[0].readResponse().header("X-Path") == "/first")
            responder.firstAnswerRead.signal()
            let second = try clients[1].readResponse()
            #expect(second.status == 200, "\(second.bodyText)")
            for (client, path) in zip(clients[2...], paths[2...]) {
                #expect(try client.readResponse().header("X-Path") == path)
            }
        }
    }

    @Test func requestsABatchLeavesAreAnsweredAloneAndNotBatchedAgain() throws {
        let responder = BatchingResponder()
        try withServer(responder, configure: { $0.workerCount = 1; $0.eventLoopCount = 1 }) { port, server in
            let paths = ["/r0", "/left/1", "/r2", "/left/3", "/r4"]
            let (_, clients) = try queueFive(behind: responder, port: port, server: server, paths: paths)
            for (client, path) in zip(clients, paths) {
                let response = try client.readResponse()
                #expect(response.status == 200)
                #expect(response.header("X-Path") == path)
            }
            #expect(responder.batchSizes.withLock { $0 } == [5])
            #expect(responder.answeredAlone.withLock { $0 } == ["/block", "/left/1", "/left/3"])
        }
    }
}
