public import HTTP1
public import HTTPServer
public import Logging
import Synchronization

/// Routes the service's requests, on the server's worker threads.
///
/// | route | methods |
/// | --- | --- |
/// | `/users/profile/{id}` | `GET`, `HEAD`, `PUT` (`GET` with `Accept: text/event-stream`: the event stream) |
/// | `/users/profile/{id}/events` | `GET`: the profile's event stream (Server-Sent Events) |
/// | `/healthz` | `GET`, `HEAD`: the process answers |
/// | `/readyz` | `GET`, `HEAD`: PostgreSQL reachable and not draining (memcached reported) |
/// | `/metrics` | `GET`, `HEAD`: Prometheus text, when a renderer is configured |
///
/// Every answer carries `X-Request-ID` (the client's, if well formed, else a new one), is
/// counted in ``ServiceMetrics`` and, when configured, logged as one access line (``AccessLog``).
public struct ProfileResponder: HTTPResponder {
    public typealias Worker = ProfileWorker

    public static let profilePathPrefix = "/users/profile/"
    /// The largest body any route takes (a profile write): the server's body limit, so a larger
    /// one is refused with 413 on its head, unread.
    public static let maximumRequestBodyBytes = ProfileWriteRequest.maximumBodyBytes
    /// The profile route's label in metrics and in ``allowedMethods``.
    static let profileRoute = "/users/profile/{id}"
    /// The event stream's route label.
    static let eventsRoute = "/users/profile/{id}/events"
    static let eventsSuffix = "/events"

    /// Every route and the methods it answers (the `Allow` of its 405). `openapi.yaml` must
    /// document exactly these; `scripts/check-deploy.py` reads this table to hold them together.
    static let allowedMethods: [String: String] = [
        "/users/profile/{id}": "GET, HEAD, PUT",
        "/users/profile/{id}/events": "GET",
        "/healthz": "GET, HEAD",
        "/readyz": "GET, HEAD",
        "/metrics": "GET, HEAD",
    ]

    /// ``allowedMethods`` as sets, for the one method check every request goes through.
    private static let allowedMethodSets = allowedMethods.mapValues { list in
        Set(list.split(separator: ",").map { String($0.trimmed) })
    }

    /// How requests are observed.
    public struct Observability: Sendable {
        public var metrics: ServiceMetrics
        /// One `info` line per request (see ``AccessLog``); `nil` for none.
        public var accessLog: AccessLog?
        /// Renders `GET /metrics`; `nil` answers 404 there.
        public var renderMetrics: (@Sendable () -> [UInt8])?

        public init(
            metrics: ServiceMetrics = ServiceMetrics(), accessLog: AccessLog? = nil,
            renderMetrics: (@Sendable () -> [UInt8])? = nil
        ) {
            self.metrics = metrics
            self.accessLog = accessLog
            self.renderMetrics = renderMetrics
        }
    }

    private let makeWorkerBody: @Sendable (Int) throws -> ProfileWorker
    private let lifecycle: ServiceLifecycle
    let observability: Observability
    /// ``Observability/accessLog`` when the logger's level lets `info` lines through.
    private let accessLog: AccessLog?
    let authorization: ProfileAuthorization
    /// Who a request comes from, for per-client limits.
    let clientIdentity: ClientIdentity
    /// The live updates this instance serves and feeds; without it the event stream is 404.
    let liveUpdates: ProfileUpdateHub?
    let logger: Logger

    /// - Parameters:
    ///   - authorization: who may read and write profiles; checked before anything else of a request.
    ///   - liveUpdates: the event streams' hub; successful writes are published to it.
    ///   - makeWorker: builds a worker's resources; called once on each worker thread.
    public init(
        lifecycle: ServiceLifecycle, authorization: ProfileAuthorization, observability: Observability = Observability(),
        liveUpdates: ProfileUpdateHub? = nil, clientIdentity: ClientIdentity = ClientIdentity(), logger: Logger,
        makeWorker: @escaping @Sendable (Int) throws -> ProfileWorker
    ) {
        self.makeWorkerBody = makeWorker
        self.lifecycle = lifecycle
        self.observability = observability
        self.accessLog = logger.logLevel <= .info ? observability.accessLog : nil
        self.authorization = authorization
        self.clientIdentity = clientIdentity
        self.liveUpdates = liveUpdates
        self.logger = logger
    }

    public func makeWorker(index: Int) throws -> ProfileWorker {
        try makeWorkerBody(index)
    }

    public func respond(to request: HTTPRequest, worker: ProfileWorker) -> HTTPResponse {
        let started = worker.batchStarted ?? ContinuousClock.now
        worker.batchPolicy.record(profileRead: Self.isProfileRead(request))
        var (response, route) = self.route(request, worker: worker)
        let requestID = RequestID.accepting(request.headers["X-Request-ID"])
        response.headers.replaceOrAdd(name: "X-Request-ID", value: requestID)
        let duration = ContinuousClock.now - started
        observability.metrics.recordRequest(
            route: route, method: request.method.rawValue, status: response.status.code, duration: duration,
            cache: worker.requestSeries)
        accessLog?.record(request, response, requestID: requestID, duration: duration, into: &worker.accessLogLine)
        return response
    }

    /// The answer and the route's label for metrics (never the raw path: ids would explode it).
    private func route(_ request: HTTPRequest, worker: ProfileWorker) -> (HTTPResponse, String) {
        let path = request.path
        let route: String
        if path.hasPrefix(Self.profilePathPrefix), path.hasSuffix(Self.eventsSuffix) {
            route = Self.eventsRoute
        } else if path.hasPrefix(Self.profilePathPrefix) {
            route = Self.profileRoute
        } else if Self.allowedMethods[path] != nil, path != "/metrics" || observability.renderMetrics != nil {
            route = path
        } else {
            let problem = Problem(.notFound, kind: "no-such-route", detail: "no route for \(path.prefix(200))")
            return (problem.response, "unmatched")
        }
        guard Self.allowedMethodSets[route]?.contains(request.method.rawValue) == true else {
            return (Self.methodNotAllowed(route), route)
        }
        // Whoever reads the request — this service, a gateway, a log — must agree on who asks.
        if request.headers.count(of: "Authorization") > 1 {
            return (Self.duplicateAuthorization.response, route)
        }
        switch route {
        case "/healthz":
            return (Self.uncached(Self.json(.ok, #"{"status":"ok"}"#)), route)
        case "/readyz":
            return (Self.uncached(readiness(worker: worker)), route)
        case "/metrics":
            observability.metrics.sampleGauges()
            let body = observability.renderMetrics?() ?? []
            return (
                Self.uncached(
                    HTTPResponse(
                        status: .ok, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"], body: body)),
                route
            )
        case Self.eventsRoute:
            let profilePath = String(path.dropLast(Self.eventsSuffix.count))
            return (handle { () throws(Problem) in try openEventStream(request, path: profilePath, worker: worker) }, route)
        default:  // Self.profileRoute, the only other entry of allowedMethods
            let response =
                if request.method == .put {
                    handle { () throws(Problem) in try putProfile(request, worker: worker) }
                } else if request.method == .get, Self.acceptsEventStream(request) {
                    handle { () throws(Problem) in try openEventStream(request, path: path, worker: worker) }
                } else {
                    handle { () throws(Problem) in try getProfile(request, worker: worker) }
                }
            return (response, route)
        }
    }

    /// Ready when PostgreSQL answers and no drain has begun; memcached's state (`up`, `degraded`:
    /// some nodes, `down`; docs/design.md §5) is reported but not required, since reads fall back
    /// to PostgreSQL without it.
    /// The change feed is reported too, never required: the cache is still served while it is
    /// down, only repaired later (docs/design.md §3).
    private func readiness(worker: ProfileWorker) -> HTTPResponse {
        let memcached = worker.cacheReadiness().rawValue
        let feed = Self.changeFeedJSON(lifecycle.changeFeed.current)
        if lifecycle.isDraining {
            return Self.json(
                .serviceUnavailable, #"{"status":"draining","memcached":"\#(memcached)","change_feed":\#(feed)}"#)
        }
        guard worker.store.isHealthy() else {
            return Self.json(
                .serviceUnavailable,
                #"{"status":"unavailable","database":"down","memcached":"\#(memcached)","change_feed":\#(feed)}"#)
        }
        return Self.json(.ok, #"{"status":"ready","database":"up","memcached":"\#(memcached)","change_feed":\#(feed)}"#)
    }

    private static func changeFeedJSON(_ status: ChangeFeedStatus) -> String {
        let seconds = (status.lagSeconds * 1000).rounded() / 1000
        var reason = ""
        if status.state == .stalled {
            var quoted: [UInt8] = Array(#","reason":""#.utf8)
            HTTPResponse.appendJSONEscaped(status.detail ?? "", to: &quoted)
            reason = String(decoding: quoted + [UInt8(ascii: "\"")], as: UTF8.self)
        }
        var slot = ""
        if let walStatus = status.slotWALStatus {
            slot = #","slot_wal_status":"\#(walStatus)""#
            if let retained = status.slotRetainedBytes { slot += #","slot_retained_bytes":\#(retained)"# }
        }
        return #"{"state":"\#(status.state.rawValue)","lag_bytes":\#(status.lagBytes),"lag_seconds":\#(seconds),"#
            + #""pending_repairs":\#(status.pendingRepairs),"gaps_closed":\#(status.gapsClosed)\#(slot)\#(reason)}"#
    }

    private func handle(_ body: () throws(Problem) -> HTTPResponse) -> HTTPResponse {
        do {
            return try body()
        } catch {
            return error.response
        }
    }

    /// Health and metrics describe this instant: no cache (a gateway's, a browser's) may keep them.
    private static func uncached(_ response: HTTPResponse) -> HTTPResponse {
        var response = response
        response.headers.replaceOrAdd(name: "Cache-Control", value: "no-store")
        return response
    }

    static func json(_ status: HTTPStatus, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: Array(text.utf8))
    }

    /// More than one `Authorization` field: a gateway that reads the last one would disagree
    /// with a service that reads the first about who is asking.
    static let duplicateAuthorization = Problem(
        .badRequest, kind: "duplicate-authorization", detail: "send one Authorization field, not several",
        field: "Authorization")

    static func methodNotAllowed(_ route: String) -> HTTPResponse {
        let allowed = allowedMethods[route] ?? "GET"
        return Problem(
            .methodNotAllowed, kind: "method-not-allowed", detail: "allowed methods: \(allowed)",
            headers: ["Allow": allowed]
        ).response
    }
}

/// Process-wide run state that the routes report, such as a drain in progress.
public final class ServiceLifecycle: Sendable {
    private let draining = Atomic<Bool>(false)
    /// The change feed's state, reported by `/readyz`.
    public let changeFeed: ChangeFeedMonitor

    public init(changeFeed: ChangeFeedMonitor = ChangeFeedMonitor(enabled: false)) {
        self.changeFeed = changeFeed
    }

    /// True once a shutdown has begun: `/readyz` answers 503 so gateways stop sending traffic.
    public var isDraining: Bool { draining.load(ordering: .acquiring) }

    public func beginDraining() { draining.store(true, ordering: .releasing) }
}
