public import HTTP1
public import HTTPServer
public import Logging
import PostgresClient
import Synchronization

/// Routes the service's requests (``Route``), on the server's worker threads.
///
/// Every answer carries `X-Request-ID` (the client's, if well formed, else a new one), is
/// counted in ``ServiceMetrics`` and, when configured, logged as one access line (``AccessLog``).
public struct ProfileResponder: HTTPResponder {
    public typealias Worker = ProfileWorker

    public static let profilePathPrefix = Route.profilePathPrefix
    static let eventsSuffix = Route.eventsSuffix
    /// The largest body any route takes (a profile write): the server's body limit, so a larger
    /// one is refused with 413 on its head, unread.
    public static let maximumRequestBodyBytes = ProfileWriteRequest.maximumBodyBytes

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
    let lifecycle: ServiceLifecycle
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
            route: route?.rawValue ?? "unmatched", method: request.method.rawValue, status: response.status.code, duration: duration,
            cache: worker.requestSeries)
        accessLog?.record(request, response, requestID: requestID, duration: duration, into: &worker.accessLogLine)
        return response
    }

    /// The answer and its route (nil: none matched).
    private func route(_ request: HTTPRequest, worker: ProfileWorker) -> (HTTPResponse, Route?) {
        let path = request.path
        guard let route = Route(path: path), route != .metrics || observability.renderMetrics != nil else {
            return (Problem(.noSuchRoute, detail: "no route for \(path.prefix(200))").response, nil)
        }
        guard route.methods.contains(request.method) else {
            return (Self.methodNotAllowed(route), route)
        }
        do throws(Problem) {
            try Self.refuseDuplicateAuthorization(request)
        } catch {
            return (error.response, route)
        }
        switch route {
        case .health:
            return (Self.uncached(Self.json(.ok, #"{"status":"ok"}"#)), route)
        case .readiness:
            return (Self.uncached(readiness(worker: worker)), route)
        case .metrics:
            observability.metrics.sampleGauges()
            let body = observability.renderMetrics?() ?? []
            return (
                Self.uncached(
                    HTTPResponse(
                        status: .ok, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"], body: body)),
                route
            )
        case .profileEvents:
            let profilePath = String(path.dropLast(Self.eventsSuffix.count))
            return (handle { () throws(Problem) in try openEventStream(request, path: profilePath, worker: worker) }, route)
        case .profiles:
            return (handle { () throws(Problem) in try getProfiles(request, worker: worker) }, route)
        case .profilesEvents:
            return (handle { () throws(Problem) in try openListEventStream(request, worker: worker) }, route)
        case .profile:
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

    static func methodNotAllowed(_ route: Route) -> HTTPResponse {
        let allowed = route.allowHeader
        return Problem(.methodNotAllowed, detail: "allowed methods: \(allowed)", headers: ["Allow": allowed]).response
    }
}
