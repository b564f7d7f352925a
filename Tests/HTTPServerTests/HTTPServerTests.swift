import Dispatch
import Foundation
import HTTP1
import HTTPServer
import TestSupport
import Testing

@Suite struct HTTPServerTests {
    @Test func answersAndKeepsAlive() throws {
        try withServer(EchoResponder()) { port, _ in
            let client = try HTTPTestClient(port: port)
            for index in 0..<3 {
                try client.send("GET /hello/\(index)?a=1 HTTP/1.1\r\nHost: localhost\r\n\r\n")
                let response = try client.readResponse()
                #expect(response.status == 200)
                #expect(response.header("X-Path") == "/hello/\(index)")
                #expect(response.header("X-Query") == "a=1")
                #expect(response.header("Content-Length") == "\(response.body.count)")
                #expect(response.header("Date")?.hasSuffix(" GMT") == true)
                #expect(response.header("Connection") == nil)
            }
        }
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        try withServer(EchoResponder(), configure: { $0.workerCount = 4 }) { port, _ in
            let client = try HTTPTestClient(port: port)
            try client.send(
                "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"
                    + "POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\n\r\npayload"
                    + "GET /3 HTTP/1.1\r\nHost: a\r\n\r\n")
            let responses = try (0..<3).map { _ in try client.readResponse() }
            #expect(responses.map { $0.header("X-Path") } == ["/1", "/2", "/3"])
            #expect(responses[1].bodyText == "payload")
            #expect(responses.allSatisfy { $0.status == 200 })
        }
    }

    @Test func manyPipelinedRequestsInOneWriteLoseNoBytes() throws {
        try withServer(EchoResponder(), configure: { $0.workerCount = 4 }) { port, _ in
            let client = try HTTPTestClient(port: port)
            let count = 200
            var batch = ""
            for index in 0..<count { batch += "GET /r\(index) HTTP/1.1\r\nHost: a\r\n\r\n" }
            try client.send(batch)
            for index in 0..<count {
                #expect(try client.readResponse().header("X-Path") == "/r\(index)")
            }
        }
    }

    @Test func pipelinedResponsesStayOrderedWhenWorkersAndTheLoopBothWrite() throws {
        // /big (16 MiB) cannot be sent at once: the worker hands its tail to the loop; the small
        // responses around it are written by workers directly, one of them with Connection: close.
        try withServer(EchoResponder(), configure: { $0.workerCount = 4 }) { port, _ in
            let client = try HTTPTestClient(port: port)
            try client.send(
                "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n" + "GET /big HTTP/1.1\r\nHost: a\r\n\r\n"
                    + "GET /3 HTTP/1.1\r\nHost: a\r\n\r\n" + "GET /big HTTP/1.1\r\nHost: a\r\n\r\n"
                    + "GET /5 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            let responses = try (0..<5).map { _ in try client.readResponse() }
            #expect(responses.map(\.status) == [200, 200, 200, 200, 200])
            #expect(responses.map { $0.header("X-Path") } == ["/1", nil, "/3", nil, "/5"])
            #expect(responses[1].body.count == 16 << 20)
            #expect(responses[3].body.count == 16 << 20)
            #expect(client.isClosedByServer())

            // Not pipelined: each response written directly, the connection back to reading each time.
            let sequential = try HTTPTestClient(port: port)
            for index in 0..<50 {
                try sequential.send("GET /s\(index) HTTP/1.1\r\nHost: a\r\n\r\n")
                #expect(try sequential.readResponse().header("X-Path") == "/s\(index)")
            }
        }
    }

    @Test func aConnectionIsNeverClosedWhileItsRequestIsInAWorker() throws {
        // If the loop closed A while its worker still held A's descriptor number, B could get that
        // number and receive A's response.
        let responder = BlockingResponder()
        try withServer(responder, configure: { $0.idleTimeout = .seconds(2) }) { port, server in
            for reset in [false, true] {
                let first = try HTTPTestClient(port: port)
                try first.send("GET /block HTTP/1.1\r\nHost: a\r\n\r\n")
                responder.entered.wait()
                // EOF (RDHUP), or a reset (ERR, HUP), reaches the loop while the request is in the worker.
                if reset { first.reset() } else { first.close() }
                usleepMilliseconds(500)  // the event and a few timer ticks (200 ms)
                #expect(server.statistics.openConnections == 1, "closed while its request was in a worker")

                let second = try HTTPTestClient(port: port)
                try second.send("GET /second HTTP/1.1\r\nHost: a\r\n\r\n")
                #expect(try second.readResponse().bodyText == "done /second")
                responder.releaseAll(1)
                #expect(
                    eventually { server.statistics.openConnections == 1 }, "the first closes once the worker is done")
                try second.send("GET /again HTTP/1.1\r\nHost: a\r\n\r\n")
                #expect(try second.readResponse().bodyText == "done /again")
                #expect(!second.hasInput())
                second.close()
                #expect(eventually { server.statistics.openConnections == 0 })
            }
        }
    }

    @Test func connectionCloseAndHTTP10() throws {
        try withServer(EchoResponder()) { port, _ in
            let closing = try HTTPTestClient(port: port)
            try closing.send("GET /c HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            let closed = try closing.readResponse()
            #expect(closed.header("Connection") == "close")
            #expect(closing.isClosedByServer())

            let old = try HTTPTestClient(port: port)
            try old.send("GET /old HTTP/1.0\r\n\r\n")
            let oldResponse = try old.readResponse()
            #expect(oldResponse.status == 200)
            #expect(oldResponse.header("Connection") == "close")
            #expect(old.isClosedByServer())

            let oldKeepAlive = try HTTPTestClient(port: port)
            for _ in 0..<2 {
                try oldKeepAlive.send("GET /ka HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                let response = try oldKeepAlive.readResponse()
                #expect(response.status == 200)
                #expect(response.header("Connection") == "keep-alive")
            }
        }
    }

    @Test func headHasLengthButNoBody() throws {
        try withServer(EchoResponder()) { port, _ in
            let client = try HTTPTestClient(port: port)
            // A body after the HEAD response would corrupt the parse of the GET response that follows.
            try client.send("HEAD /h HTTP/1.1\r\nHost: a\r\n\r\nGET /h HTTP/1.1\r\nHost: a\r\n\r\n")
            let head = try client.readResponse(toHead: true)
            let get = try client.readResponse()
            #expect(head.status == 200)
            #expect(get.header("X-Method") == "GET")
            #expect(head.header("Content-Length") == "\("HEAD /h".utf8.count)")
        }
    }

    @Test func requestLineLimitAnswers414AndCloses() throws {
        try withServer(EchoResponder(), configure: { $0.maxRequestLineBytes = 100 }) { port, _ in
            let client = try HTTPTestClient(port: port)
            try client.send("GET /" + String(repeating: "a", count: 200) + " HTTP/1.1\r\nHost: a\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 414)
            #expect(response.header("Content-Type") == "application/problem+json")
            #expect(response.header("Connection") == "close")
            #expect(response.bodyText.contains(#""status":414"#))
            #expect(client.isClosedByServer())
        }
    }

    @Test func headerLimitsAnswer431() throws {
        try withServer(
            EchoResponder(),
            configure: {
                $0.maxHeaderBytes = 256
                $0.maxHeaderCount = 5
            }
        ) { port, _ in
            let big = try HTTPTestClient(port: port)
            try big.send("GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + String(repeating: "b", count: 300) + "\r\n\r\n")
            #expect(try big.readResponse().status == 431)
            #expect(big.isClosedByServer())

            let many = try HTTPTestClient(port: port)
            var request = "GET / HTTP/1.1\r\nHost: a\r\n"
            for index in 0..<6 { request += "X-\(index): v\r\n" }
            try many.send(request + "\r\n")
            #expect(try many.readResponse().status == 431)
        }
    }

    @Test func bodyLimitAnswers413WithoutReadingTheBody() throws {
        try withServer(EchoResponder(), configure: { $0.maxBodyBytes = 1024 }) { port, _ in
            let client = try HTTPTestClient(port: port)
            // Only the head is sent: the answer cannot depend on the body.
            try client.send("POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 10000000\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 413)
            #expect(response.header("Connection") == "close")
            #expect(client.isClosedByServer())

            // Part of a too-large body already on the wire still gets the 413, not a reset.
            let eager = try HTTPTestClient(port: port)
            try eager.send(
                "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 4096\r\n\r\n" + String(repeating: "x", count: 4096))
            #expect(try eager.readResponse().status == 413)
        }
    }

    @Test func expectContinue() throws {
        try withServer(EchoResponder(), configure: { $0.maxBodyBytes = 1024 }) { port, _ in
            let client = try HTTPTestClient(port: port)
            try client.send("PUT /p HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
            let interim = try client.readResponse()
            #expect(interim.status == 100)
            try client.send("hello")
            let final = try client.readResponse()
            #expect(final.status == 200)
            #expect(final.bodyText == "hello")

            let tooLarge = try HTTPTestClient(port: port)
            try tooLarge.send("PUT /p HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n")
            #expect(try tooLarge.readResponse().status == 413)
        }
    }

    @Test func chunkedRequestBody() throws {
        try withServer(EchoResponder()) { port, _ in
            let client = try HTTPTestClient(port: port)
            try client.send("POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
            try client.send("4\r\nWiki\r\n")
            try client.send("5;ext=1\r\npedia\r\n0\r\nX-Checksum: 1\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.bodyText == "Wikipedia")
            #expect(response.header("X-Body-Length") == "9")
        }
    }

    @Test func framingErrorIsAnsweredOnceThenClosed() throws {
        try withServer(EchoResponder()) { port, _ in
            let smuggler = try HTTPTestClient(port: port)
            try smuggler.send(
                "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                    + "GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n")
            let response = try smuggler.readResponse()
            #expect(response.status == 400)
            #expect(response.header("Content-Type") == "application/problem+json")
            #expect(response.bodyText.hasPrefix(#"{"type":"about:blank","title":"Bad Request","status":400,"detail":"#))
            #expect(smuggler.isClosedByServer())

            let noHost = try HTTPTestClient(port: port)
            try noHost.send("GET / HTTP/1.1\r\n\r\n")
            #expect(try noHost.readResponse().status == 400)

            let version = try HTTPTestClient(port: port)
            try version.send("GET / HTTP/2.0\r\nHost: a\r\n\r\n")
            #expect(try version.readResponse().status == 505)

            let coding = try HTTPTestClient(port: port)
            try coding.send("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
            #expect(try coding.readResponse().status == 501)
        }
    }

    @Test func drippingClientIsCutAtTheHeadDeadline() throws {
        try withServer(EchoResponder(), configure: { $0.headDeadline = .milliseconds(300) }) { port, _ in
            let client = try HTTPTestClient(port: port)
            // 200 bytes at one per 20 ms would take 4 s: more than ten times the deadline.
            let request = Array(("GET / HTTP/1.1\r\nHost: a\r\nX-Slow: " + String(repeating: "s", count: 200)).utf8)
            var sent = 0
            while sent < request.count, !client.hasInput() {
                do { try client.send([request[sent]]) } catch { break }
                sent += 1
                usleepMilliseconds(20)
            }
            #expect(sent < request.count, "the server waited for the whole drip")
            let response = try client.readResponse()
            #expect(response.status == 408)
            #expect(client.isClosedByServer())
        }
    }

    @Test func stalledBodyIsCutAtTheBodyDeadline() throws {
        try withServer(EchoResponder(), configure: { $0.bodyDeadline = .milliseconds(300) }) { port, _ in
            let client = try HTTPTestClient(port: port)
            try client.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nhalf!")
            let response = try client.readResponse()
            #expect(response.status == 408)
            #expect(client.isClosedByServer())
        }
    }

    @Test func clientThatDoesNotReadIsCutAtTheWriteDeadline() throws {
        try withServer(EchoResponder(), configure: { $0.writeDeadline = .milliseconds(300) }) { port, server in
            let client = try HTTPTestClient(port: port)
            // 16 MiB cannot fit in the socket buffers of an unread loopback connection.
            try client.send("GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(eventually { server.statistics.openConnections == 0 })
        }
    }

    @Test func idleKeepAliveConnectionIsClosedAfterIdleTimeout() throws {
        try withServer(EchoResponder(), configure: { $0.idleTimeout = .milliseconds(200) }) { port, _ in
            let client = try HTTPTestClient(port: port)
            try client.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try client.readResponse().status == 200)
            #expect(client.isClosedByServer())
        }
    }

    @Test func blockingHandlersRunInParallelOnTheWorkerPool() throws {
        let parties = 6
        try withServer(BarrierResponder(parties: parties), configure: { $0.workerCount = parties }) { port, _ in
            let clients = try (0..<parties).map { _ in try HTTPTestClient(port: port) }
            for client in clients { try client.send("GET /barrier HTTP/1.1\r\nHost: a\r\n\r\n") }
            for client in clients { #expect(try client.readResponse().status == 200) }
        }
    }

    @Test func fullQueueAnswers503AtOnce() throws {
        let responder = BlockingResponder()
        try withServer(
            responder,
            configure: {
                $0.workerCount = 1
                $0.queueCapacity = 1
            }
        ) { port, server in
            defer { responder.releaseAll(2) }
            let busy = try HTTPTestClient(port: port)
            try busy.send("GET /block HTTP/1.1\r\nHost: a\r\n\r\n")
            responder.entered.wait()
            let queued = try HTTPTestClient(port: port)
            try queued.send("GET /queued HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(eventually { server.statistics.queuedRequests == 1 })
            #expect(server.statistics.busyWorkers == 1)

            let refused = try HTTPTestClient(port: port)
            try refused.send("GET /refused HTTP/1.1\r\nHost: a\r\n\r\n")
            let response = try refused.readResponse()
            #expect(response.status == 503)
            #expect(response.header("Retry-After") == "1")
            #expect(response.header("Content-Type") == "application/problem+json")

            responder.releaseAll(1)
            #expect(try busy.readResponse().bodyText == "done /block")
            #expect(try queued.readResponse().bodyText == "done /queued")
        }
    }

    @Test func gracefulShutdownFinishesInFlightRequests() throws {
        let responder = BlockingResponder()
        let server = HTTPServer(configuration: testConfiguration(), responder: responder, logger: testLogger)
        let port = try server.start()
        let idle = try HTTPTestClient(port: port)
        try idle.send("GET /quick HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(try idle.readResponse().status == 200)
        let inFlight = try HTTPTestClient(port: port)
        try inFlight.send("GET /block HTTP/1.1\r\nHost: a\r\n\r\n")
        responder.entered.wait()
        #expect(server.statistics.openConnections == 2)

        server.shutdown()
        server.shutdown()  // idempotent
        #expect(idle.isClosedByServer(), "idle keep-alive connections close at once")
        #expect(throws: HTTPTestClient.Failure.self) { try HTTPTestClient(port: port) }

        responder.releaseAll(1)
        let response = try inFlight.readResponse()
        #expect(response.status == 200)
        #expect(response.bodyText == "done /block")
        #expect(response.header("Connection") == "close")
        #expect(inFlight.isClosedByServer())
        server.waitUntilStopped()
        #expect(server.statistics.openConnections == 0)
    }

    @Test func shutdownClosesStuckRequestsAtTheDrainTimeout() throws {
        let responder = BlockingResponder()
        let server = HTTPServer(
            configuration: testConfiguration { $0.drainTimeout = .milliseconds(200) }, responder: responder,
            logger: testLogger)
        let port = try server.start()
        let stuck = try HTTPTestClient(port: port)
        try stuck.send("GET /block HTTP/1.1\r\nHost: a\r\n\r\n")
        responder.entered.wait()
        server.shutdown()
        #expect(stuck.isClosedByServer())
        responder.releaseAll(1)
        server.waitUntilStopped()
    }

    @Test func connectionsOverTheLimitAreClosedUnlessAnIdleOneMakesRoom() throws {
        try withServer(EchoResponder(), configure: { $0.maxConnections = 1 }) { port, server in
            // A connection that has not sent its first request is not idle: the newcomer is closed.
            let fresh = try HTTPTestClient(port: port)
            let refused = try HTTPTestClient(port: port)
            #expect(refused.isClosedByServer())
            #expect(server.statistics.openConnections == 1)
            try fresh.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try fresh.readResponse().status == 200)

            // Now it is an idle keep-alive connection: a newcomer takes its place. (The event loop
            // counts it idle once the worker has handed it back, a moment after the answer left;
            // a newcomer arriving within that moment is closed like the first, so it tries again.)
            let (newcomerStatus, newcomers) = try connectUntilAnswered(port: port)
            defer { withExtendedLifetime(newcomers) {} }
            #expect(newcomerStatus == 200)
            #expect(fresh.isClosedByServer())
            #expect(server.statistics.openConnections == 1)
            #expect(server.statistics.idleConnectionsClosedForRoom == 1)
        }
    }

    @Test func startFailsWhenAWorkerCannotStart() {
        let server = HTTPServer(configuration: testConfiguration(), responder: FailingResponder(), logger: testLogger)
        #expect(throws: FailingResponder.WorkerFailed.self) { try server.start() }
        server.waitUntilStopped()
    }

    @Test func startFailsWhenThePortIsTaken() throws {
        try withServer(EchoResponder()) { port, _ in
            let second = HTTPServer(
                configuration: testConfiguration { $0.port = port }, responder: EchoResponder(), logger: testLogger)
            #expect(throws: IOError.self) { try second.start() }
        }
    }
}
