// A trivial server for scripts/bench-http.sh: answers every request with a fixed 74-byte JSON body.
// Built with swiftc against the release objects of HTTP1, HTTPServer and Logging (not a package product).
import Glibc
import HTTP1
import HTTPServer
import Logging

struct EchoResponder: HTTPResponder {
    static let body = Array(#"{"id":"00000000-0000-0000-0000-000000000000","name":"bench!!","version":1}"#.utf8)

    func makeWorker(index: Int) throws {}

    func respond(to request: HTTPRequest, worker: Void) -> HTTPResponse {
        HTTPResponse(status: .ok, headers: ["Content-Type": "application/json"], body: Self.body)
    }
}

precondition(EchoResponder.body.count == 74, "body is \(EchoResponder.body.count) bytes")
var configuration = HTTPServerConfiguration()
configuration.port = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 8080
configuration.workerCount = Int(CommandLine.arguments.dropFirst(2).first ?? "") ?? 16
var logger = Logger(label: "http-echo")
logger.logLevel = .info
let server = HTTPServer(configuration: configuration, responder: EchoResponder(), logger: logger)
_ = try server.start()
server.waitUntilStopped()
