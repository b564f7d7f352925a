public import HTTPServer
import Metrics
public import ServiceRuntime
import Synchronization

/// The service's metrics, through swift-metrics: the executable bootstraps the backend
/// (Prometheus) and renders `GET /metrics`; without a backend every metric is a no-op.
///
/// Every label set is closed: routes are the responder's route names (or `unmatched`), methods the
/// ones in ``methodLabel(_:)`` (else `other`), statuses the service's own: nothing from request text
/// becomes a label, so no client can grow `/metrics` (docs/design.md §5.5).
///
/// | series | labels |
/// | --- | --- |
/// | `http_requests_total` | `route`, `method`, `status` |
/// | `http_request_duration_seconds` (histogram) | `route`, `method`, `status` |
/// | `profile_cache_events_total` | `event` (see ``CacheStatistics/Event``) |
/// | `profile_database_errors_total` | `kind` |
/// | `http_open_connections`, `http_queued_requests`, `http_busy_workers` (gauges) | |
/// | `sse_subscribers`, `sse_subscriptions` (gauges: streams, and profiles they follow together), `sse_events_sent_total`, `sse_subscribers_cut_slow_total`, `sse_subscribers_refused_total` | |
/// | `sse_subscribers_refused_per_client_total` (429), `sse_subscribers_ended_total` (lifetime or token expiry) | |
/// | `http_requests_refused_before_body_total` | profile writes refused on their head, body unread |
/// | `http_idle_connections_closed_for_room_total` | idle keep-alive connections closed at the connection limit |
/// | `profile_log_lines_dropped_total` | log lines the ``LogSink`` dropped because stderr blocked |
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
    private let streamSubscribers = Gauge(label: "sse_subscribers")
    private let streamSubscriptions = Gauge(label: "sse_subscriptions")
    private let streamEventsSent = Counter(label: "sse_events_sent_total")
    private let streamsCutAsSlow = Counter(label: "sse_subscribers_cut_slow_total")
    private let streamsRefused = Counter(label: "sse_subscribers_refused_total")
    private let streamsRefusedPerClient = Counter(label: "sse_subscribers_refused_per_client_total")
    private let streamsEnded = Counter(label: "sse_subscribers_ended_total")
    private let idleClosedForRoom = Counter(label: "http_idle_connections_closed_for_room_total")
    /// The server's counters' values at the last sample: the counters advance by the difference.
    private let sampledServerCounters = Mutex<[Int]>([0, 0, 0, 0, 0, 0])
    private let droppedLogLines = Counter(label: "profile_log_lines_dropped_total")
    private let refusedBeforeBody = Counter(label: "http_requests_refused_before_body_total")
    /// Where the server's statistics come from; set once the server exists.
    private let serverStatistics = Mutex<(@Sendable () -> HTTPServerStatistics)?>(nil)
    /// The sink whose drops are reported, and how many of them the counter has seen.
    private let logSink = Mutex<(sink: LogSink, reported: Int)?>(nil)

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

    /// Lets `/metrics` report the lines `sink` dropped (`profile_log_lines_dropped_total`).
    public func observe(logSink sink: LogSink) {
        logSink.withLock { $0 = (sink, sink.droppedLines) }
        droppedLogLines.increment(by: 0)  // the series exists from the start
    }

    /// Refreshes the gauges that are sampled rather than counted; call before rendering.
    func sampleGauges() {
        let newlyDropped = logSink.withLock { state -> Int in
            guard let (sink, reported) = state else { return 0 }
            let total = sink.droppedLines
            state = (sink, total)
            return total - reported
        }
        if newlyDropped > 0 { droppedLogLines.increment(by: newlyDropped) }
        guard let statistics = serverStatistics.withLock({ $0 })?() else { return }
        openConnections.record(statistics.openConnections)
        queuedRequests.record(statistics.queuedRequests)
        busyWorkers.record(statistics.busyWorkers)
        let streams = statistics.eventStreams
        if let streams {
            streamSubscribers.record(streams.subscribers)
            streamSubscriptions.record(streams.subscriptions)
        }
        let counted: [(Counter, Int)] = [
            (streamEventsSent, streams?.eventsSent ?? 0), (streamsCutAsSlow, streams?.subscribersCutAsSlow ?? 0),
            (streamsRefused, streams?.subscribersRefused ?? 0),
            (streamsRefusedPerClient, streams?.subscribersRefusedPerClient ?? 0),
            (streamsEnded, streams?.subscribersEnded ?? 0), (idleClosedForRoom, statistics.idleConnectionsClosedForRoom),
        ]
        let increments = sampledServerCounters.withLock { last in
            defer { last = counted.map(\.1) }
            return zip(counted, last).map { $0.1 - $1 }
        }
        for ((counter, _), increment) in zip(counted, increments) where increment > 0 {
            counter.increment(by: increment)
        }
    }
}

/// One worker's handles of the request series (used on that worker's thread only).
final class RequestSeriesCache {
    var series: [ServiceMetrics.RequestKey: ServiceMetrics.RequestSeries] = [:]
}
