import Dispatch
import Foundation
import HTTP1
import HTTPServer
import Logging
import Synchronization
import TestSupport

/// Echoes what it received: method, path, query and body length in headers, the body as body.
struct EchoResponder: SingleRequestResponder {
    func makeWorker(index: Int) throws -> Int { index }

    func respond(to request: HTTPRequest, worker: Int) -> HTTPResponse {
        var headers: HTTPHeaders = [
            "X-Method": request.method.rawValue, "X-Path": request.path, "X-Body-Length": "\(request.body.count)",
            "X-Worker": "\(worker)",
        ]
        if let query = request.query { headers.add(name: "X-Query", value: query) }
        if request.path == "/big" { return HTTPResponse(status: .ok, body: Array(repeating: 0x62, count: 16 << 20)) }
        let body = request.body.isEmpty ? Array("\(request.method) \(request.path)".utf8) : request.body
        return HTTPResponse(status: .ok, headers: headers, body: body)
    }
}

/// Blocks requests to `/block` until released; answers anything else at once.
final class BlockingResponder: SingleRequestResponder {
    /// Signalled when a `/block` request starts.
    let entered = DispatchSemaphore(value: 0)
    private let release = DispatchSemaphore(value: 0)

    func makeWorker(index: Int) throws {}

    func respond(to request: HTTPRequest, worker: Void) -> HTTPResponse {
        if request.path == "/block" {
            entered.signal()
            release.wait()
        }
        return HTTPResponse(status: .ok, body: Array("done \(request.path)".utf8))
    }

    func releaseAll(_ count: Int) {
        for _ in 0..<count { release.signal() }
    }
}

struct FailingResponder: SingleRequestResponder {
    struct WorkerFailed: Error {}
    func makeWorker(index: Int) throws -> Int {
        if index == 1 { throw WorkerFailed() }
        return index
    }
    func respond(to request: HTTPRequest, worker: Int) -> HTTPResponse { HTTPResponse(status: .ok) }
}

func testConfiguration(_ configure: (inout HTTPServerConfiguration) -> Void = { _ in }) -> HTTPServerConfiguration {
    var configuration = HTTPServerConfiguration()
    configuration.port = 0
    configuration.workerCount = 2
    configuration.queueCapacity = 16
    configure(&configuration)
    return configuration
}

var testLogger: Logger {
    var logger = Logger(label: "HTTPServerTests")
    logger.logLevel = .warning
    return logger
}

/// Starts a server on an ephemeral loopback port, runs `body`, then shuts it down gracefully.
func withServer<Responder: HTTPResponder>(
    _ responder: Responder, configure: (inout HTTPServerConfiguration) -> Void = { _ in },
    _ body: (_ port: Int, _ server: HTTPServer<Responder>) throws -> Void
) throws {
    let server = HTTPServer(configuration: testConfiguration(configure), responder: responder, logger: testLogger)
    let port = try server.start()
    defer {
        server.shutdown()
        server.waitUntilStopped()
    }
    try body(port, server)
}

/// Sends `GET path` on `client` and reads the answer's status.
func getStatus(_ client: HTTPTestClient, _ path: String = "/") throws -> Int {
    try client.send("GET \(path) HTTP/1.1\r\nHost: a\r\n\r\n")
    return try client.readResponse().status
}

/// At the connection limit, opens connections until one is answered, at most 50, 10 ms apart:
/// the loop counts a keep-alive connection idle (one that may make room) once the worker has handed
/// it back, a moment after its answer left, and a newcomer arriving within that moment is closed.
/// Returns the answer's status and every connection opened, for the caller to keep open.
func connectUntilAnswered(port: Int) throws -> (status: Int?, connections: [HTTPTestClient]) {
    var connections: [HTTPTestClient] = []
    for _ in 0..<50 {
        let newcomer = try HTTPTestClient(port: port)
        connections.append(newcomer)
        let status = try? getStatus(newcomer)
        if let status { return (status, connections) }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return (nil, connections)
}

/// Polls `condition` every 10 ms for up to 10 s.
func eventually(_ condition: () -> Bool) -> Bool {
    for _ in 0..<1000 {
        if condition() { return true }
        usleepMilliseconds(10)
    }
    return condition()
}

func usleepMilliseconds(_ milliseconds: Int) {
    let deadline = ContinuousClock.now.advanced(by: .milliseconds(milliseconds))
    while ContinuousClock.now < deadline {
        _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .milliseconds(milliseconds))
    }
}

/// Answers only once `parties` requests are inside `respond` at the same time (a barrier), or 500
/// after 5 s: proves that blocking handlers run in parallel on the worker pool.
final class BarrierResponder: SingleRequestResponder {
    let parties: Int
    private let arrived = Mutex(0)
    private let gate = DispatchSemaphore(value: 0)

    init(parties: Int) { self.parties = parties }

    func makeWorker(index: Int) throws {}

    func respond(to request: HTTPRequest, worker: Void) -> HTTPResponse {
        let count = arrived.withLock { value -> Int in
            value += 1
            return value
        }
        if count == parties {
            for _ in 0..<(parties - 1) { gate.signal() }
            return HTTPResponse(status: .ok)
        }
        return gate.wait(timeout: .now() + .seconds(5)) == .success
            ? HTTPResponse(status: .ok) : HTTPResponse(status: .internalServerError)
    }
}
