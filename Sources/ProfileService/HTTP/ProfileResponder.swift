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
    public typealias Classified = ClassifiedRequest

    public static let profilePathPrefix = Route.profilePathPrefix
    static let eventsSuffix = Route.eventsSuffix
    static let exportSuffix = Route.exportSuffix
    /// The largest body any route takes (a profile write under any declared fields): the
    /// server's body limit, so a larger one is refused with 413 on its head, unread. A write
    /// larger than its own declarations allow is refused by the route, 413 too.
    public static let maximumRequestBodyBytes = ProfileFieldCatalog.largestWriteBodyBytes

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
    /// Counts what the request path parses, for a test (``ParseCounts``); nil in production.
    let parseCounts: ParseCounts?
    /// The declared fields a write may set (``ProfileFieldCatalog``).
    let profileFields: ProfileFieldCatalog

    /// - Parameters:
    ///   - authorization: who may read and write profiles; checked before anything else of a request.
    ///   - liveUpdates: the event streams' hub; successful writes are published to it.
    ///   - parseCounts: counts what the request path parses (tests).
    ///   - profileFields: the declared fields; the workers' stores and cache must use the same.
    ///   - makeWorker: builds a worker's resources; called once on each worker thread.
    public init(
        lifecycle: ServiceLifecycle, authorization: ProfileAuthorization, observability: Observability = Observability(),
        liveUpdates: ProfileUpdateHub? = nil, clientIdentity: ClientIdentity = ClientIdentity(), logger: Logger,
        parseCounts: ParseCounts? = nil, profileFields: ProfileFieldCatalog = .standard,
        makeWorker: @escaping @Sendable (Int) throws -> ProfileWorker
    ) {
        self.parseCounts = parseCounts
        self.profileFields = profileFields
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

    /// Classifies `request` (its body included) and answers it, as a worker answers one request
    /// taken alone: for tests and tools that call the responder without a server.
    public func respond(to request: HTTPRequest, worker: ProfileWorker) -> HTTPResponse {
        let classified: ClassifiedRequest
        switch classify(head: request, bodyFollows: false) {
        case .accept(let value, _): classified = value
        case .refuse(let refusal): return refusal
        }
        return respond(to: request, classified, worker: worker)
    }

    /// Answers one request with what its batch learned for it (nothing when taken alone).
    ///
    /// - Parameter started: when the work it waited for began (a batch's round trip, a load):
    ///   its logged duration counts from there.
    func respond(
        to request: HTTPRequest, _ classified: ClassifiedRequest, worker: ProfileWorker, started: ContinuousClock.Instant = .now,
        batched: BatchedAnswer? = nil
    ) -> HTTPResponse {
        worker.batchPolicy.record(profileRead: classified.isProfileRead)
        var (response, route) = self.route(request, classified, worker: worker, batched: batched)
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
    private func route(
        _ request: HTTPRequest, _ classified: ClassifiedRequest, worker: ProfileWorker, batched: BatchedAnswer?
    ) -> (HTTPResponse, Route?) {
        switch classified.kind {
        case .refused(let problem, let route):
            return (problem.response, route)
        case .unauthorizedWrite(let problem):
            return (problem.response, .profile)
        case .read(let read):
            let outcome: ProfileRepository.BatchedRead? = if case .read(let outcome)? = batched { outcome } else { nil }
            return (handle { () throws(Problem) in try getProfile(read, request, worker: worker, batched: outcome) }, .profile)
        case .write(let write):
            // Parsed by the group that made it with others, else here, taken alone.
            let (parsed, made) = batched?.written ?? (parsedWrite(write, request), nil)
            return (handle { () throws(Problem) in try answerWrite(parsed, worker: worker, madeTogether: made) }, .profile)
        case .patch(let patch):
            let (parsed, made) = batched?.written ?? (parsedWrite(patch, request), nil)
            return (handle { () throws(Problem) in try answerWrite(parsed, worker: worker, madeTogether: made) }, .profile)
        case .delete(let deletion):
            return (handle { () throws(Problem) in try deleteProfile(deletion, worker: worker) }, .profile)
        case .handleRead(let read):
            let found: ProfileRepository.HandleAnswer? = if case .handle(let found)? = batched { found } else { nil }
            return (handle { () throws(Problem) in try getProfile(read, request, worker: worker, found: found) }, .profileByUsername)
        case .list(let list):
            return (handle { () throws(Problem) in try getProfiles(list, request, worker: worker) }, .profiles)
        case .handleList(let list):
            return (handle { () throws(Problem) in try getProfiles(list, request, worker: worker) }, .profiles)
        case .export(let export):
            return (handle { () throws(Problem) in try exportProfile(export, worker: worker) }, .profileExport)
        case .events(let stream):
            return (handle { () throws(Problem) in try openEventStream(stream, request, worker: worker) }, stream.route)
        case .listEvents(let stream):
            return (handle { () throws(Problem) in try openListEventStream(stream, request, worker: worker) }, .profilesEvents)
        case .instance(let route):
            return (answer(route, worker: worker), route.route)
        }
    }

    /// The answer of a route about the instance itself: it takes nothing of the head.
    private func answer(_ route: InstanceRoute, worker: ProfileWorker) -> HTTPResponse {
        switch route {
        case .health:
            return Self.uncached(Self.json(.ok, #"{"status":"ok"}"#))
        case .readiness:
            return Self.uncached(readiness(worker: worker))
        case .metrics:
            observability.metrics.sampleGauges()
            let body = observability.renderMetrics?() ?? []
            return Self.uncached(
                HTTPResponse(status: .ok, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"], body: body))
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

    static func methodNotAllowedProblem(_ route: Route) -> Problem {
        let allowed = route.allowHeader
        return Problem(.methodNotAllowed, detail: "allowed methods: \(allowed)", headers: ["Allow": allowed])
    }
}
