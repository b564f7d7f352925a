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

    /// Ready when PostgreSQL answers and no drain has begun; memcached's state (`up`, `degraded`:
    /// some nodes, `down`; docs/design.md §5) is reported but not required, since reads fall back
    /// to PostgreSQL without it.
    /// The change feed is reported too, never required: the cache is still served while it is
    /// down, only repaired later (docs/design.md §3).
    /// Standbys (docs/design.md §8) are reported, never required: without them the primary answers.
    private func readiness(worker: ProfileWorker) -> HTTPResponse {
        let memcached = worker.cacheReadiness().rawValue
        let feedStatus = lifecycle.changeFeed.current
        var feed = Self.changeFeedJSON(feedStatus)
        if !feedStatus.clusters.isEmpty { feed += #","cache_clusters":"# + Self.cacheClustersJSON(feedStatus.clusters) }
        if let replicas = lifecycle.replicas { feed += #","replicas":"# + Self.replicasJSON(replicas.statuses) }
        if lifecycle.isDraining {
            return Self.json(
                .serviceUnavailable, #"{"status":"draining","memcached":"\#(memcached)","change_feed":\#(feed)}"#)
        }
        guard worker.store.isHealthy() else {
            // libpq's reason, so that an operator sees "password authentication failed" or
            // "certificate verify failed" here and not only in the log.
            var reason: [UInt8] = []
            if let message = lifecycle.databaseHealth?.downReason {
                reason = Array(#","database_error":""#.utf8)
                HTTPResponse.appendJSONEscaped(message, to: &reason)
                reason.append(UInt8(ascii: "\""))
            }
            let databaseError = String(decoding: reason, as: UTF8.self)
            return Self.json(
                .serviceUnavailable,
                #"{"status":"unavailable","database":"down"\#(databaseError),"memcached":"\#(memcached)","change_feed":\#(feed)}"#)
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
        return #"{"cluster":"\#(status.cluster.name)","state":"\#(status.state.rawValue)","lag_bytes":\#(status.lagBytes),"lag_seconds":\#(seconds),"#
            + #""pending_repairs":\#(status.pendingRepairs),"gaps_closed":\#(status.gapsClosed)\#(slot)\#(reason)}"#
    }

    /// Every cache cluster's slot (docs/design.md §3.10): whether it has a consumer, which, and
    /// the WAL it is behind and keeps.
    static func cacheClustersJSON(_ clusters: [CacheClusterStatus]) -> String {
        let items = clusters.map { cluster in
            var text: [UInt8] = Array(#"{"name":"\#(cluster.cluster.name)","consumed":\#(cluster.isConsumed)"#.utf8)
            if let consumer = cluster.consumer {
                text += Array(#","consumer":""#.utf8)
                HTTPResponse.appendJSONEscaped(consumer, to: &text)
                text.append(UInt8(ascii: "\""))
            }
            if let lag = cluster.lagBytes { text += Array(#","lag_bytes":\#(lag)"#.utf8) }
            if let retained = cluster.retainedBytes { text += Array(#","retained_bytes":\#(retained)"#.utf8) }
            if let walStatus = cluster.walStatus { text += Array(#","wal_status":"\#(walStatus)""#.utf8) }
            if !cluster.isConsumed {
                text += Array(#","unconsumed_seconds":\#(Int(cluster.unconsumedSeconds))"#.utf8)
            }
            text.append(UInt8(ascii: "}"))
            return String(decoding: text, as: UTF8.self)
        }
        return "[" + items.joined(separator: ",") + "]"
    }

    static func replicasJSON(_ statuses: [ReadReplicas.Status]) -> String {
        let items = statuses.map { status in
            var text: [UInt8] = Array(#"{"name":""#.utf8)
            HTTPResponse.appendJSONEscaped(status.name, to: &text)
            text += Array(("\",\"state\":\"" + status.state.rawValue + "\"").utf8)
            if let bytes = status.lagBytes { text += Array(#","lag_bytes":\#(bytes)"#.utf8) }
            if let seconds = status.lagSeconds { text += Array(#","lag_seconds":\#((seconds * 1000).rounded() / 1000)"#.utf8) }
            text += Array(#","reads_served":\#(status.readsServed)"#.utf8)
            if let detail = status.detail {
                text += Array(#","reason":""#.utf8)
                HTTPResponse.appendJSONEscaped(detail, to: &text)
                text.append(UInt8(ascii: "\""))
            }
            text.append(UInt8(ascii: "}"))
            return String(decoding: text, as: UTF8.self)
        }
        return "[" + items.joined(separator: ",") + "]"
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
