public import HTTP1
public import HTTPServer
public import Logging
import Synchronization

/// Routes the service's requests, on the server's worker threads.
///
/// | route | methods |
/// | --- | --- |
/// | `/users/profile/{id}` | `GET`, `HEAD`, `PUT` |
/// | `/healthz` | `GET`, `HEAD`: the process answers |
/// | `/readyz` | `GET`, `HEAD`: PostgreSQL reachable and not draining |
public struct ProfileResponder: HTTPResponder {
    public typealias Worker = ProfileWorker

    public static let profilePathPrefix = "/users/profile/"

    private let makeWorkerBody: @Sendable (Int) throws -> ProfileWorker
    private let lifecycle: ServiceLifecycle
    let authorization: ProfileAuthorization
    let logger: Logger

    /// - Parameters:
    ///   - authorization: who may read and write profiles; checked before anything else of a request.
    ///   - makeWorker: builds a worker's resources; called once on each worker thread.
    public init(
        lifecycle: ServiceLifecycle, authorization: ProfileAuthorization, logger: Logger,
        makeWorker: @escaping @Sendable (Int) throws -> ProfileWorker
    ) {
        self.makeWorkerBody = makeWorker
        self.lifecycle = lifecycle
        self.authorization = authorization
        self.logger = logger
    }

    public func makeWorker(index: Int) throws -> ProfileWorker {
        try makeWorkerBody(index)
    }

    public func respond(to request: HTTPRequest, worker: ProfileWorker) -> HTTPResponse {
        let path = request.path
        if path.hasPrefix(Self.profilePathPrefix) {
            let allowed = "GET, HEAD, PUT"
            switch request.method {
            case .get, .head: return handle { () throws(Problem) in try getProfile(request, worker: worker) }
            case .put: return handle { () throws(Problem) in try putProfile(request, worker: worker) }
            default: return Self.methodNotAllowed(allowed)
            }
        }
        switch path {
        case "/healthz":
            guard request.method == .get || request.method == .head else { return Self.methodNotAllowed("GET, HEAD") }
            return Self.json(.ok, #"{"status":"ok"}"#)
        case "/readyz":
            guard request.method == .get || request.method == .head else { return Self.methodNotAllowed("GET, HEAD") }
            return readiness(worker: worker)
        default:
            return Problem(.notFound, kind: "no-such-route", detail: "no route for \(path.prefix(200))").response
        }
    }

    private func readiness(worker: ProfileWorker) -> HTTPResponse {
        if lifecycle.isDraining {
            return Self.json(.serviceUnavailable, #"{"status":"draining"}"#)
        }
        guard worker.store.isHealthy() else {
            return Self.json(.serviceUnavailable, #"{"status":"unavailable","database":"down"}"#)
        }
        return Self.json(.ok, #"{"status":"ready","database":"up"}"#)
    }

    private func handle(_ body: () throws(Problem) -> HTTPResponse) -> HTTPResponse {
        do {
            return try body()
        } catch {
            return error.response
        }
    }

    static func json(_ status: HTTPStatus, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: Array(text.utf8))
    }

    static func methodNotAllowed(_ allowed: String) -> HTTPResponse {
        Problem(
            .methodNotAllowed, kind: "method-not-allowed", detail: "allowed methods: \(allowed)",
            headers: ["Allow": allowed]
        ).response
    }
}

/// Process-wide run state that the routes report, such as a drain in progress.
public final class ServiceLifecycle: Sendable {
    private let draining = Atomic<Bool>(false)

    public init() {}

    /// True once a shutdown has begun: `/readyz` answers 503 so gateways stop sending traffic.
    public var isDraining: Bool { draining.load(ordering: .acquiring) }

    public func beginDraining() { draining.store(true, ordering: .releasing) }
}
