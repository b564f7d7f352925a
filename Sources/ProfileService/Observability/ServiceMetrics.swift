public import HTTPServer
import Metrics
import Synchronization

/// The service's metrics, through swift-metrics: the executable bootstraps the backend
/// (Prometheus) and renders `GET /metrics`; without a backend every metric is a no-op.
///
/// | series | labels |
/// | --- | --- |
/// | `http_requests_total` | `route`, `method`, `status` |
/// | `http_request_duration_seconds` (histogram) | `route`, `method`, `status` |
/// | `profile_cache_events_total` | `event` (see ``CacheStatistics/Event``) |
/// | `profile_database_errors_total` | `kind` |
/// | `http_open_connections`, `http_queued_requests`, `http_busy_workers` (gauges) | |
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
            count = Counter(label: "http_requests_total", dimensions: dimensions)
            duration = Metrics.Timer(label: "http_request_duration_seconds", dimensions: dimensions)
        }
    }
    private let openConnections = Gauge(label: "http_open_connections")
    private let queuedRequests = Gauge(label: "http_queued_requests")
    private let busyWorkers = Gauge(label: "http_busy_workers")
    /// Where the server's statistics come from; set once the server exists.
    private let serverStatistics = Mutex<(@Sendable () -> HTTPServerStatistics)?>(nil)

    public init() {}

    func recordRequest(
        route: String, method: String, status: Int, duration: Duration, cache: RequestSeriesCache
    ) {
        let key = RequestKey(route: route, method: method, status: status)
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

    /// Lets `/metrics` report the server's connection and queue gauges.
    public func observe(_ statistics: @escaping @Sendable () -> HTTPServerStatistics) {
        serverStatistics.withLock { $0 = statistics }
    }

    /// Refreshes the gauges that are sampled rather than counted; call before rendering.
    func sampleGauges() {
        guard let statistics = serverStatistics.withLock({ $0 })?() else { return }
        openConnections.record(statistics.openConnections)
        queuedRequests.record(statistics.queuedRequests)
        busyWorkers.record(statistics.busyWorkers)
    }
}

/// One worker's handles of the request series (used on that worker's thread only).
final class RequestSeriesCache {
    var series: [ServiceMetrics.RequestKey: ServiceMetrics.RequestSeries] = [:]
}
