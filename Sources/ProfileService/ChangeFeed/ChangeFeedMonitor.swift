import Metrics
public import PostgresClient
import ServiceRuntime
import Synchronization

/// What the change feed of this instance is doing.
public enum ChangeFeedState: String, Sendable {
    /// `--no-change-feed`: the cache is repaired only by the writers (docs/design.md §3).
    case disabled
    case starting
    /// This instance streams the slot and repairs the cache for the whole cluster.
    case active
    /// Another instance streams the slot; this one takes over when it stops.
    case standby
    /// PostgreSQL cannot stream now: down, or not configured for logical decoding.
    case unavailable
    /// The feed cannot go on by itself: a publication is missing, or a gap cannot be closed yet
    /// because a memcached node does not take the flush. `detail` says why and the remedy
    /// (docs/design.md §3.7).
    case stalled
}

/// A snapshot for `/readyz` and tests.
public struct ChangeFeedStatus: Sendable, Equatable {
    /// The cache cluster this instance's feed repairs.
    public var cluster = CacheCluster.default
    public var state: ChangeFeedState
    /// Why the feed is not active, when it is unavailable or stalled.
    public var detail: String?
    /// The last position confirmed to PostgreSQL by this instance.
    public var confirmedLSN: LSN?
    /// WAL the server has sent past the confirmed position.
    public var lagBytes: UInt64
    /// From the commit of the last applied transaction to its application; 0 when caught up.
    public var lagSeconds: Double
    /// Changes applied by this instance since it started.
    public var changesApplied: Int
    /// Changes (and flushes) held back because their memcached node did not answer.
    public var pendingRepairs: Int
    /// Changes of a transaction applied in parts that wait for its last part (docs/design.md §3.9).
    public var changesWaiting = 0
    /// The most changes the feed held in memory at once since it started (bounded by
    /// ``ChangeFeedConfiguration/maxChangesInMemory``).
    public var mostChangesHeld = 0
    /// Gaps in the commit stream this instance closed (docs/design.md §3.7).
    public var gapsClosed = 0
    /// The slot's `wal_status` as last read (`reserved`, `extended`, `unreserved`, `lost`), or
    /// `missing`; nil before the first look.
    public var slotWALStatus: String?
    /// The WAL the server keeps for the slot, as last read.
    public var slotRetainedBytes: Int64?
    /// Every cache cluster's slot as last read, this instance's own among them (empty before the
    /// first look, or when the feed is off).
    public var clusters: [CacheClusterStatus] = []
    /// The memcached node sets this instance's cluster is served with, by its live instances
    /// (``CacheClusterNodeSet``); more than one means only the consumer's set is repaired. Empty
    /// before the first look.
    public var nodeSets: [CacheClusterNodeSet] = []
}

/// The feed's state, shared between its thread and the request workers (for `/readyz`), and
/// mirrored in metrics:
///
/// | series | meaning |
/// | --- | --- |
/// | `profile_service_change_feed_active` | 1 while this instance consumes the slot |
/// | `profile_service_change_feed_lag_bytes` | WAL sent past the confirmed position |
/// | `profile_service_change_feed_lag_seconds` | commit → applied, of the last applied transaction |
/// | `profile_service_change_feed_changes_total{outcome}` | changes applied, by ``ProfileRepository/RefreshOutcome`` |
/// | `profile_service_change_feed_pending_repairs` | changes and flushes waiting for a memcached node |
/// | `profile_service_change_feed_stalled` | 1 while the feed cannot go on by itself (see ``ChangeFeedState/stalled``) |
/// | `profile_service_change_feed_gaps_total` | gaps in the commit stream closed by invalidating the cache |
/// | `profile_service_change_feed_slot_retained_bytes` | WAL the server keeps for the slot (bounded by `max_slot_wal_keep_size`) |
/// | `profile_service_change_feed_slot_lost` | 1 while the slot is missing or invalidated (`wal_status = lost`) |
/// | `profile_service_cache_cluster_consumed{cluster}` | 1 while a session streams that cluster's slot |
/// | `profile_service_cache_cluster_lag_bytes{cluster}` | WAL written past that cluster's confirmed position |
/// | `profile_service_cache_cluster_retained_bytes{cluster}` | WAL the server keeps for that cluster's slot |
/// | `profile_service_cache_cluster_unconsumed_seconds{cluster}` | how long this instance has seen that slot without a consumer |
/// | `profile_service_cache_cluster_node_sets{cluster}` | memcached node sets that cluster's live instances serve |
///
/// The `change_feed` series carry this instance's `cluster`; the `cache_cluster` series are
/// every cluster's, as PostgreSQL shows them (docs/design.md §3.10).
public final class ChangeFeedMonitor: Sendable {
    private let status: Mutex<ChangeFeedStatus>
    private let activeGauge: Gauge
    private let lagBytesGauge: Gauge
    private let lagSecondsGauge: Gauge
    private let pendingGauge: Gauge
    private let waitingGauge: Gauge
    private let stalledGauge: Gauge
    private let gapsCounter: Counter
    private let slotRetainedGauge: Gauge
    private let slotLostGauge: Gauge
    private let outcomeCounters: [ProfileRepository.RefreshOutcome: Counter]
    /// Each cluster's gauges and since when its slot is seen without a consumer.
    private let clusters = Mutex<[CacheCluster: ClusterSeries]>([:])
    /// Each cluster's node set gauge.
    private let nodeSetGauges = Mutex<[CacheCluster: Gauge]>([:])

    public init(enabled: Bool, cluster: CacheCluster = .default) {
        status = Mutex(
            ChangeFeedStatus(
                cluster: cluster, state: enabled ? .starting : .disabled, detail: nil, confirmedLSN: nil, lagBytes: 0,
                lagSeconds: 0, changesApplied: 0, pendingRepairs: 0))
        let label = [("cluster", cluster.name)]
        activeGauge = Gauge(label: MetricFamily.changeFeedActive.name, dimensions: label)
        lagBytesGauge = Gauge(label: MetricFamily.changeFeedLagBytes.name, dimensions: label)
        lagSecondsGauge = Gauge(label: MetricFamily.changeFeedLagSeconds.name, dimensions: label)
        pendingGauge = Gauge(label: MetricFamily.changeFeedPendingRepairs.name, dimensions: label)
        waitingGauge = Gauge(label: MetricFamily.changeFeedChangesWaiting.name, dimensions: label)
        stalledGauge = Gauge(label: MetricFamily.changeFeedStalled.name, dimensions: label)
        gapsCounter = Counter(label: MetricFamily.changeFeedGaps.name, dimensions: label)
        slotRetainedGauge = Gauge(label: MetricFamily.changeFeedSlotRetainedBytes.name, dimensions: label)
        slotLostGauge = Gauge(label: MetricFamily.changeFeedSlotLost.name, dimensions: label)
        var counters: [ProfileRepository.RefreshOutcome: Counter] = [:]
        for outcome in [ProfileRepository.RefreshOutcome.current, .stored, .invalidated, .absent, .failed] {
            counters[outcome] = Counter(
                label: MetricFamily.changeFeedChanges.name, dimensions: label + [("outcome", outcome.rawValue)])
        }
        outcomeCounters = counters
    }

    public var current: ChangeFeedStatus { status.withLock { $0 } }

    func enter(_ state: ChangeFeedState, detail: String? = nil) {
        status.withLock {
            $0.state = state
            $0.detail = detail
        }
        activeGauge.record(state == .active ? 1 : 0)
        stalledGauge.record(state == .stalled ? 1 : 0)
    }

    /// What `pg_replication_slots` says of the slot now (nil: there is none).
    func recordSlot(_ slot: LogicalReplicationSetup.SlotStatus?) {
        let walStatus = slot.map { $0.walStatus ?? "unknown" } ?? "missing"
        status.withLock {
            $0.slotWALStatus = walStatus
            $0.slotRetainedBytes = slot?.retainedBytes
        }
        slotRetainedGauge.record(slot?.retainedBytes ?? 0)
        slotLostGauge.record(walStatus == "lost" || walStatus == "missing" ? 1 : 0)
    }

    /// What `pg_replication_slots` says of the cache clusters' slots in this database, with how
    /// long each has been seen without a consumer; a cluster whose slot was dropped leaves the metrics.
    func recordClusters(
        _ slots: [(cluster: CacheCluster, slot: LogicalReplicationSetup.NamedSlot)], now: ContinuousClock.Instant = .now
    ) {
        let statuses = clusters.withLock { series in
            var seen: Set<CacheCluster> = []
            let statuses = slots.map { cluster, slot -> CacheClusterStatus in
                seen.insert(cluster)
                var entry = series[cluster] ?? ClusterSeries(cluster)
                if slot.status.isActive {
                    entry.unconsumedSince = nil
                } else if entry.unconsumedSince == nil {
                    entry.unconsumedSince = now
                }
                series[cluster] = entry
                let status = CacheClusterStatus(
                    cluster, slot: slot,
                    unconsumedSeconds: entry.unconsumedSince.map { Double($0.duration(to: now).totalNanoseconds) / 1e9 } ?? 0)
                entry.record(status)
                return status
            }
            for (cluster, gone) in series where !seen.contains(cluster) {
                gone.destroy()
                series[cluster] = nil
            }
            return statuses
        }
        status.withLock { $0.clusters = statuses }
    }

    /// Every cluster's node sets among its live instances (``CacheClusterNodeSet``); this
    /// instance's cluster's are kept for `/readyz`. Returns them.
    @discardableResult
    func recordNodeSets(_ sets: [CacheCluster: [CacheClusterNodeSet]]) -> [CacheClusterNodeSet] {
        nodeSetGauges.withLock { gauges in
            for (cluster, clusterSets) in sets {
                let gauge = gauges[cluster] ?? Gauge(label: MetricFamily.cacheClusterNodeSets.name, dimensions: [("cluster", cluster.name)])
                gauge.record(clusterSets.count)
                gauges[cluster] = gauge
            }
            for (cluster, gone) in gauges where sets[cluster] == nil {
                gone.destroy()
                gauges[cluster] = nil
            }
        }
        return status.withLock {
            $0.nodeSets = sets[$0.cluster] ?? []
            return $0.nodeSets
        }
    }

    func recordGap() {
        gapsCounter.increment()
        status.withLock { $0.gapsClosed += 1 }
    }

    /// A batch was applied: `heldInMemory` changes at once; `waiting` changes of a transaction
    /// applied in parts wait for its last part before the position can move past them.
    func recordApplied(
        _ outcomes: [ProfileRepository.RefreshOutcome], lastCommitTime: Int64, heldInMemory: Int = 0, waiting: Int = 0
    ) {
        var counts: [ProfileRepository.RefreshOutcome: Int] = [:]
        for outcome in outcomes { counts[outcome, default: 0] += 1 }
        for (outcome, count) in counts { outcomeCounters[outcome]?.increment(by: count) }
        let lag = max(0, Double(Int64.postgresNow - lastCommitTime) / 1_000_000)
        status.withLock {
            $0.changesApplied += outcomes.count
            $0.lagSeconds = lag
            $0.changesWaiting = waiting
            $0.mostChangesHeld = max($0.mostChangesHeld, heldInMemory)
        }
        lagSecondsGauge.record(lag)
        waitingGauge.record(waiting)
    }

    func recordPosition(confirmed: LSN, serverEnd: LSN, pending: Int) {
        let lagBytes = serverEnd > confirmed ? serverEnd.rawValue - confirmed.rawValue : 0
        let caughtUp = lagBytes == 0 && pending == 0
        status.withLock {
            $0.confirmedLSN = confirmed
            $0.lagBytes = lagBytes
            $0.pendingRepairs = pending
            if caughtUp { $0.lagSeconds = 0 }
        }
        lagBytesGauge.record(Int64(clamping: lagBytes))
        pendingGauge.record(pending)
        if caughtUp { lagSecondsGauge.record(0) }
    }
}

/// The gauges of one cache cluster's slot, and since when it has had no consumer.
private struct ClusterSeries {
    var unconsumedSince: ContinuousClock.Instant?
    let consumed: Gauge
    let lagBytes: Gauge
    let retainedBytes: Gauge
    let unconsumedSeconds: Gauge

    init(_ cluster: CacheCluster) {
        let label = [("cluster", cluster.name)]
        consumed = Gauge(label: MetricFamily.cacheClusterConsumed.name, dimensions: label)
        lagBytes = Gauge(label: MetricFamily.cacheClusterLagBytes.name, dimensions: label)
        retainedBytes = Gauge(label: MetricFamily.cacheClusterRetainedBytes.name, dimensions: label)
        unconsumedSeconds = Gauge(label: MetricFamily.cacheClusterUnconsumedSeconds.name, dimensions: label)
    }

    func record(_ status: CacheClusterStatus) {
        consumed.record(status.isConsumed ? 1 : 0)
        lagBytes.record(status.lagBytes ?? 0)
        retainedBytes.record(status.retainedBytes ?? 0)
        unconsumedSeconds.record(status.unconsumedSeconds)
    }

    func destroy() {
        consumed.destroy()
        lagBytes.destroy()
        retainedBytes.destroy()
        unconsumedSeconds.destroy()
    }
}
