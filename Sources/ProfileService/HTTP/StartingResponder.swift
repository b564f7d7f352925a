public import HTTP1
public import HTTPServer
import Synchronization

/// What an instance answers while it waits for PostgreSQL at start to read the declared profile
/// fields (docs/design.md §11.1): `/healthz` 200 (the process is alive), `/readyz` 503 with
/// libpq's reason, every other request 503 `database-unavailable` with `Retry-After`. It cannot
/// serve a profile before it knows what a profile is; a gateway routes elsewhere meanwhile.
public final class StartingResponder: SingleRequestResponder, Sendable {
    private let reason = Mutex<String>("")

    public init() {}

    /// Why PostgreSQL cannot be read now (libpq's message), for `/readyz`.
    public func waiting(because reason: String) {
        self.reason.withLock { $0 = reason }
    }

    public func makeWorker(index: Int) -> Void {}

    public func respond(to request: HTTPRequest, worker: Void) -> HTTPResponse {
        switch request.path {
        case Route.health.rawValue:
            return HTTPResponse(
                status: .ok, headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
                body: Array(#"{"status":"ok"}"#.utf8))
        case Route.readiness.rawValue:
            var json = JSONWriter()
            json.beginObject()
            json.member("status", "unavailable")
            json.member("database", "down")
            json.member("database_error", reason.withLock { $0 })
            json.key("change_feed")
            json.beginObject()
            json.member("state", "starting")
            json.endObject()
            json.endObject()
            return HTTPResponse(
                status: .serviceUnavailable, headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
                body: json.bytes)
        default:
            return Problem.databaseUnavailable().response
        }
    }
}
