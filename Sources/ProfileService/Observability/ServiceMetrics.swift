public import HTTPServer
public import MemcachedClient
import Metrics
public import PostgresClient
public import ServiceRuntime
import Synchronization

/// The service's metrics, through swift-metrics: the executable bootstraps the backend
/// (Prometheus) and renders `GET /metrics`; without a backend every metric is a no-op. Every
/// family, with its type, labels and help, is declared in ``MetricFamily``.
///
/// Every label set is closed: routes are the responder's route names (or `unmatched`), methods the
/// ones in ``methodLabel(_:)`` (else `other`), statuses the service's own, nodes and replicas the
/// configured ones: nothing from request text becomes a label, so no client can grow `/metrics`
/// (docs/design.md §5.5).
public final class ServiceMetrics: Sendable {
    struct RequestKey: Hashable {
        var route: String
        var method: String
        var status: Int
    }

    /// The handles of one route, method and status. swift-metrics returns the same backend
    /// series for the same label and dimensions, so each worker keeps its own handles in a
    /// ``RequestSeriesCache`` and the request path takes no lock.
    struct RequestSeries {
        let count: Counter
        let duration: Metrics.Timer

        init(_ key: RequestKey) {
            let dimensions = [("route", key.route), ("method", key.method), ("status", String(key.status))]
            count = Counter(label: MetricFamily.httpRequests.name, dimensions: dimensions)
            duration = Metrics.Timer(label: MetricFamily.httpRequestDuration.name, dimensions: dimensions)
        }
    }
    private let openConnections = Gauge(label: MetricFamily.httpOpenConnections.name)
    private let queuedRequests = Gauge(label: MetricFamily.httpQueuedRequests.name)
    private let busyWorkers = Gauge(label: MetricFamily.httpBusyWorkers.name)
    private let streamSubscribers = Gauge(label: MetricFamily.sseSubscribers.name)
    private let streamSubscriptions = Gauge(label: MetricFamily.sseSubscriptions.name)
    private let streamEventsSent = SampledCounter(.sseEventsSent)
    private let streamsCutAsSlow = SampledCounter(.sseCutAsSlow)
    private let streamsRefused = SampledCounter(.sseRefused)
    private let streamsRefusedPerClient = SampledCounter(.sseRefusedPerClient)
    private let streamsEnded = SampledCounter(.sseEnded)
    private let idleClosedForRoom = SampledCounter(.httpIdleClosedForRoom)
    private let refusedAtCapacity = SampledCounter(.httpRefusedAtCapacity)
    private let droppedLogLines = SampledCounter(.logLinesDropped)
    private let databasePoolRefused = SampledCounter(.databasePoolRefused)
    private let databaseUp = Gauge(label: MetricFamily.databaseUp.name)
    private let refusedBeforeBody = Counter(label: MetricFamily.httpRefusedBeforeBody.name)
    /// Where the sampled figures come from; each is set once, at start.
    private let serverStatistics = Mutex<(@Sendable () -> HTTPServerStatistics)?>(nil)
    private let logSink = Mutex<LogSink?>(nil)
    private let database = Mutex<(health: PostgresServerHealth, pool: PostgresConnectionPool)?>(nil)
    /// Each event loop's series, made when `/metrics` first sees the loop.
    private let loopSeries = Mutex<[(connections: Gauge, requests: SampledCounter)]>([])
    private let memcachedNodes = Mutex<(breaker: NodeCircuitBreaker, nodes: [(MemcachedServer, Gauge)])?>(nil)

    public init() {}

    /// The methods that are labels of their own; any other is `other`.
    static let labelledMethods: Set<String> = ["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"]

    /// The `method` label of a request: a method the service knows, else `other`. A method is any
    /// token a client sends (up to the request line's limit), so it never becomes a label as is.
    static func methodLabel(_ method: String) -> String {
        labelledMethods.contains(method) ? method : "other"
    }

    func recordRequest(
        route: String, method: String, status: Int, duration: Duration, cache: RequestSeriesCache
    ) {
        let key = RequestKey(route: route, method: Self.methodLabel(method), status: status)
        let series: RequestSeries
        if let cached = cache.series[key] {
            series = cached
        } else {
            series = RequestSeries(key)
            cache.series[key] = series
        }
        series.count.increment()
        series.duration.recordNanoseconds(duration.totalNanoseconds)
    }

    /// A write refused on its head (401, 403, 400), before its body was read.
    func recordRefusedBeforeBody() {
        refusedBeforeBody.increment()
    }

    /// Lets `/metrics` report the server's connection and queue gauges.
    public func observe(_ statistics: @escaping @Sendable () -> HTTPServerStatistics) {
        serverStatistics.withLock { $0 = statistics }
    }

    /// Lets `/metrics` report the lines `sink` dropped (`profile_service_log_lines_dropped_total`).
    public func observe(logSink sink: LogSink) {
        logSink.withLock { $0 = sink }
        droppedLogLines.advance(to: sink.droppedLines)
    }

    /// Lets `/metrics` report whether the primary answers and the pool's refusals.
    public func observe(database health: PostgresServerHealth, pool: PostgresConnectionPool) {
        database.withLock { $0 = (health, pool) }
        databasePoolRefused.advance(to: pool.refused)
    }

    /// Lets `/metrics` report each node's breaker (`profile_service_memcached_node_up{node}`).
    public func observe(memcachedNodes nodes: [MemcachedServer], breaker: NodeCircuitBreaker) {
        let gauges = nodes.map { ($0, Gauge(label: MetricFamily.memcachedNodeUp.name, dimensions: [("node", "\($0)")])) }
        memcachedNodes.withLock { $0 = (breaker, gauges) }
    }

    /// Refreshes the figures that are sampled rather than counted; call before rendering.
    func sampleGauges() {
        if let sink = logSink.withLock({ $0 }) { droppedLogLines.advance(to: sink.droppedLines) }
        if let (health, pool) = database.withLock({ $0 }) {
            databaseUp.record(health.isDown ? 0 : 1)
            databasePoolRefused.advance(to: pool.refused)
        }
        if let (breaker, nodes) = memcachedNodes.withLock({ $0 }) {
            for (node, gauge) in nodes { gauge.record(breaker.isOpen(node) ? 0 : 1) }
        }
        guard let statistics = serverStatistics.withLock({ $0 })?() else { return }
        openConnections.record(statistics.openConnections)
        queuedRequests.record(statistics.queuedRequests)
        busyWorkers.record(statistics.busyWorkers)
        idleClosedForRoom.advance(to: statistics.idleConnectionsClosedForRoom)
        refusedAtCapacity.advance(to: statistics.requestsRefusedAtCapacity)
        loopSeries.withLock { series in
            for (index, loop) in statistics.loops.enumerated() {
                if index == series.count {
                    let dimensions = [("loop", String(index))]
                    series.append(
                        (Gauge(label: MetricFamily.httpLoopOpenConnections.name, dimensions: dimensions),
                         SampledCounter(.httpLoopRequests, dimensions: dimensions)))
                }
                series[index].connections.record(loop.openConnections)
                series[index].requests.advance(to: loop.requests)
            }
        }
        guard let streams = statistics.eventStreams else { return }
        streamSubscribers.record(streams.subscribers)
        streamSubscriptions.record(streams.subscriptions)
        streamEventsSent.advance(to: streams.eventsSent)
        streamsCutAsSlow.advance(to: streams.subscribersCutAsSlow)
        streamsRefused.advance(to: streams.subscribersRefused)
        streamsRefusedPerClient.advance(to: streams.subscribersRefusedPerClient)
        streamsEnded.advance(to: streams.subscribersEnded)
    }
}

/// A counter that mirrors a total counted elsewhere (the server's, the log sink's, the pool's):
/// each sample advances it by what the total gained since the last.
private final class SampledCounter: Sendable {
    private let counter: Counter
    private let sampled = Mutex(0)

    init(_ family: MetricFamily, dimensions: [(String, String)] = []) {
        counter = Counter(label: family.name, dimensions: dimensions)
    }

    func advance(to total: Int) {
        let gained = sampled.withLock { last in
            defer { last = max(last, total) }
            return total - last
        }
        if gained > 0 { counter.increment(by: gained) }
    }
}

/// One worker's handles of the request series (used on that worker's thread only).
final class RequestSeriesCache {
    var series: [ServiceMetrics.RequestKey: ServiceMetrics.RequestSeries] = [:]
}
