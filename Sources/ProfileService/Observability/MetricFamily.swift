/// One family of series the service exports on `/metrics`: its name, type, labels and the help
/// text Prometheus shows. ``MetricFamily/all`` is the catalogue: every family the service creates
/// is declared here, the exporter takes its `# HELP` from here, and docs/metrics.md is checked
/// against it (scripts/check-docs.py). Every name starts with ``prefix`` (`process_*` excepted: the
/// name every Prometheus client gives them) and ends in its base unit (`_seconds`, `_bytes`) or
/// `_total` for counters.
public struct MetricFamily: Sendable, Hashable {
    public enum Kind: String, Sendable {
        case counter, gauge, histogram
    }

    public let name: String
    public let kind: Kind
    public let labels: [String]
    public let help: String

    init(_ name: String, _ kind: Kind, labels: [String] = [], _ help: String) {
        self.name = name
        self.kind = kind
        self.labels = labels
        self.help = help
    }

    /// The prefix of the service's own series, so they cannot be mistaken for another program's.
    public static let prefix = "profile_service_"

    /// The family named `name` (a series' name without the `_bucket`/`_sum`/`_count` suffix of a
    /// histogram), if the service declares it.
    public static func named(_ name: String) -> MetricFamily? {
        byName[name]
    }

    private static let byName = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })
}

extension MetricFamily {
    // MARK: HTTP

    static let httpRequests = MetricFamily(
        "profile_service_http_requests_total", .counter, labels: ["route", "method", "status"],
        "Requests answered by the service's routes, by route template, method and status code.")
    static let httpRequestDuration = MetricFamily(
        "profile_service_http_request_duration_seconds", .histogram, labels: ["route", "method", "status"],
        "Time from a request's head read to its response handed to the socket, by route, method and status.")
    static let httpOpenConnections = MetricFamily(
        "profile_service_http_open_connections", .gauge, "Client connections open now, event streams included.")
    static let httpQueuedRequests = MetricFamily(
        "profile_service_http_queued_requests", .gauge, "Requests read and waiting for a worker now.")
    static let httpBusyWorkers = MetricFamily(
        "profile_service_http_busy_workers", .gauge, "Workers running a request now.")
    static let httpRefusedAtCapacity = MetricFamily(
        "profile_service_http_requests_refused_at_capacity_total", .counter,
        "Requests answered 503 without running because every worker queue was full.")
    static let httpRefusedBeforeBody = MetricFamily(
        "profile_service_http_requests_refused_before_body_total", .counter,
        "Profile writes refused on their head (401, 403, 400) before their body was read.")
    static let httpIdleClosedForRoom = MetricFamily(
        "profile_service_http_idle_connections_closed_for_room_total", .counter,
        "Idle keep-alive connections closed to admit a new connection at the connection limit.")
    static let httpLoopOpenConnections = MetricFamily(
        "profile_service_http_loop_open_connections", .gauge, labels: ["loop"],
        "Client connections each event loop serves now (loops numbered from 0).")
    static let httpLoopRequests = MetricFamily(
        "profile_service_http_loop_requests_total", .counter, labels: ["loop"],
        "Requests each event loop has read: how the load spreads over the loops.")

    // MARK: Server-Sent Events

    static let sseSubscribers = MetricFamily(
        "profile_service_sse_subscribers", .gauge, "Event streams open now.")
    static let sseSubscriptions = MetricFamily(
        "profile_service_sse_subscriptions", .gauge, "Profiles followed by the open event streams, summed over streams.")
    static let sseEventsSent = MetricFamily(
        "profile_service_sse_events_sent_total", .counter, "Events written to event streams.")
    static let sseCutAsSlow = MetricFamily(
        "profile_service_sse_subscribers_cut_slow_total", .counter,
        "Event streams closed because their client read too slowly and its buffer filled.")
    static let sseRefused = MetricFamily(
        "profile_service_sse_subscribers_refused_total", .counter,
        "Event streams refused with 503 because the instance's stream limit was reached.")
    static let sseRefusedPerClient = MetricFamily(
        "profile_service_sse_subscribers_refused_per_client_total", .counter,
        "Event streams refused with 429 because one client had its limit of streams open.")
    static let sseEnded = MetricFamily(
        "profile_service_sse_subscribers_ended_total", .counter,
        "Event streams the service ended at their lifetime or their token's expiry.")
    static let sseFetchRetries = MetricFamily(
        "profile_service_sse_fetch_retries_total", .counter,
        "Retries of the fetch that turns a change notification into a stream event.")

    // MARK: Cache and memcached

    static let cacheEvents = MetricFamily(
        "profile_service_cache_events_total", .counter, labels: ["event"],
        "What the cache protocol did: hits, misses, leases, populates, write-throughs, standby reads (docs/metrics.md lists each event).")
    static let memcachedBreakerEvents = MetricFamily(
        "profile_service_memcached_breaker_events_total", .counter, labels: ["event"],
        "What the memcached node breakers saw and did: operations failed or skipped, breakers opened, probed and recovered.")
    static let memcachedNodeUp = MetricFamily(
        "profile_service_memcached_node_up", .gauge, labels: ["node"],
        "1 while the node's breaker is closed (its operations are sent), 0 while it is open or probing.")

    // MARK: PostgreSQL

    static let databaseErrors = MetricFamily(
        "profile_service_database_errors_total", .counter, labels: ["kind"],
        "PostgreSQL errors met by request workers, by kind (connectionUnavailable, queryCanceled, lockNotAvailable, ...).")
    static let databaseUp = MetricFamily(
        "profile_service_database_up", .gauge,
        "1 while the primary PostgreSQL answers, 0 while the service has found it down and waits to reconnect.")
    static let databasePoolRefused = MetricFamily(
        "profile_service_database_pool_refused_total", .counter,
        "Requests refused (503) because PostgreSQL had stalled with every pooled connection waiting on it.")

    // MARK: Standbys

    static let replicaReads = MetricFamily(
        "profile_service_replica_reads_total", .counter, labels: ["replica", "outcome"],
        "Reads sent to a standby: served, behind (the primary answered) or failed.")
    static let replicaUp = MetricFamily(
        "profile_service_replica_up", .gauge, labels: ["replica"], "1 while the standby answers its monitor.")
    static let replicaLagBytes = MetricFamily(
        "profile_service_replica_lag_bytes", .gauge, labels: ["replica"],
        "WAL the standby has received but not replayed, or not received, behind the primary.")
    static let replicaLagSeconds = MetricFamily(
        "profile_service_replica_lag_seconds", .gauge, labels: ["replica"],
        "Time since the last transaction the standby replayed, while it is behind.")

    // MARK: Change feed and consistency

    static let changeFeedActive = MetricFamily(
        "profile_service_change_feed_active", .gauge, labels: ["cluster"],
        "1 while this instance consumes the replication slot (one instance of a fleet does).")
    static let changeFeedStalled = MetricFamily(
        "profile_service_change_feed_stalled", .gauge, labels: ["cluster"],
        "1 while the change feed cannot go on by itself (publication or slot gone, decoding failed).")
    static let changeFeedLagBytes = MetricFamily(
        "profile_service_change_feed_lag_bytes", .gauge, labels: ["cluster"], "WAL the server has sent past the position the feed confirmed.")
    static let changeFeedLagSeconds = MetricFamily(
        "profile_service_change_feed_lag_seconds", .gauge, labels: ["cluster"],
        "From the commit of the last applied transaction to its application in the cache.")
    static let changeFeedPendingRepairs = MetricFamily(
        "profile_service_change_feed_pending_repairs", .gauge, labels: ["cluster"],
        "Changes and flushes waiting for a memcached node that did not answer.")
    static let changeFeedChangesWaiting = MetricFamily(
        "profile_service_change_feed_changes_waiting", .gauge, labels: ["cluster"],
        "Changes already applied of a large transaction whose last part is not: the position waits for them.")
    static let changeFeedChanges = MetricFamily(
        "profile_service_change_feed_changes_total", .counter, labels: ["cluster", "outcome"],
        "Row changes applied to the cache, by outcome (current, stored, invalidated, absent, failed).")
    static let changeFeedGaps = MetricFamily(
        "profile_service_change_feed_gaps_total", .counter, labels: ["cluster"],
        "Gaps in the commit stream closed by making the cached entries unusable at once.")
    static let changeFeedSlotRetainedBytes = MetricFamily(
        "profile_service_change_feed_slot_retained_bytes", .gauge, labels: ["cluster"],
        "WAL PostgreSQL keeps for the replication slot (bounded by max_slot_wal_keep_size).")
    static let changeFeedSlotLost = MetricFamily(
        "profile_service_change_feed_slot_lost", .gauge, labels: ["cluster"], "1 while the replication slot is missing or invalidated.")
    static let cacheClusterConsumed = MetricFamily(
        "profile_service_cache_cluster_consumed", .gauge, labels: ["cluster"],
        "1 while a session streams the cache cluster's replication slot (its change feed has a consumer).")
    static let cacheClusterLagBytes = MetricFamily(
        "profile_service_cache_cluster_lag_bytes", .gauge, labels: ["cluster"],
        "WAL written past the position the cache cluster's change feed confirmed.")
    static let cacheClusterRetainedBytes = MetricFamily(
        "profile_service_cache_cluster_retained_bytes", .gauge, labels: ["cluster"],
        "WAL PostgreSQL keeps for the cache cluster's replication slot.")
    static let cacheClusterUnconsumedSeconds = MetricFamily(
        "profile_service_cache_cluster_unconsumed_seconds", .gauge, labels: ["cluster"],
        "How long this instance has seen the cache cluster's slot without a consumer; 0 while consumed.")
    static let cacheClusterNodeSets = MetricFamily(
        "profile_service_cache_cluster_node_sets", .gauge, labels: ["cluster"],
        "Different memcached node sets the cache cluster's live instances serve; over 1, only the consumer's set is repaired.")
    static let consistencyChecks = MetricFamily(
        "profile_service_consistency_checks_total", .counter, labels: ["result"],
        "Cached entries compared with PostgreSQL after a write: consistent, violation, inconclusive or dropped.")

    // MARK: Process

    static let logLinesDropped = MetricFamily(
        "profile_service_log_lines_dropped_total", .counter, "Log lines dropped because standard error blocked.")
    static let buildInfo = MetricFamily(
        "profile_service_build_info", .gauge, labels: ["version", "revision"],
        "Always 1: the version and source revision of the running build.")
    static let processCPUSeconds = MetricFamily(
        "process_cpu_seconds_total", .counter, "User and system CPU time spent by the process, in seconds.")
    static let processResidentMemory = MetricFamily(
        "process_resident_memory_bytes", .gauge, "Resident memory size of the process, in bytes.")
    static let processVirtualMemory = MetricFamily(
        "process_virtual_memory_bytes", .gauge, "Virtual memory size of the process, in bytes.")
    static let processOpenFDs = MetricFamily(
        "process_open_fds", .gauge, "Open file descriptors of the process.")
    static let processMaxFDs = MetricFamily(
        "process_max_fds", .gauge, "The process's limit of open file descriptors (RLIMIT_NOFILE).")
    static let processStartTime = MetricFamily(
        "process_start_time_seconds", .gauge, "When the process started, in seconds since the Unix epoch.")
    static let processThreads = MetricFamily(
        "process_threads", .gauge, "Threads of the process.")

    /// Every family the service exports.
    public static let all: [MetricFamily] = [
        httpRequests, httpRequestDuration, httpOpenConnections, httpQueuedRequests, httpBusyWorkers,
        httpRefusedAtCapacity, httpRefusedBeforeBody, httpIdleClosedForRoom, httpLoopOpenConnections, httpLoopRequests,
        sseSubscribers, sseSubscriptions, sseEventsSent, sseCutAsSlow, sseRefused, sseRefusedPerClient, sseEnded,
        sseFetchRetries,
        cacheEvents, memcachedBreakerEvents, memcachedNodeUp,
        databaseErrors, databaseUp, databasePoolRefused,
        replicaReads, replicaUp, replicaLagBytes, replicaLagSeconds,
        changeFeedActive, changeFeedStalled, changeFeedLagBytes, changeFeedLagSeconds, changeFeedPendingRepairs,
        changeFeedChangesWaiting,
        changeFeedChanges, changeFeedGaps, changeFeedSlotRetainedBytes, changeFeedSlotLost,
        cacheClusterConsumed, cacheClusterLagBytes, cacheClusterRetainedBytes, cacheClusterUnconsumedSeconds,
        cacheClusterNodeSets,
        consistencyChecks,
        logLinesDropped, buildInfo,
        processCPUSeconds, processResidentMemory, processVirtualMemory, processOpenFDs, processMaxFDs,
        processStartTime, processThreads,
    ]
}
