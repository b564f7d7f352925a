import Metrics
public import PostgresClient
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
public final class ChangeFeedMonitor: Sendable {
    private let status: Mutex<ChangeFeedStatus>
    private let activeGauge = Gauge(label: MetricFamily.changeFeedActive.name)
    private let lagBytesGauge = Gauge(label: MetricFamily.changeFeedLagBytes.name)
    private let lagSecondsGauge = Gauge(label: MetricFamily.changeFeedLagSeconds.name)
    private let pendingGauge = Gauge(label: MetricFamily.changeFeedPendingRepairs.name)
    private let waitingGauge = Gauge(label: MetricFamily.changeFeedChangesWaiting.name)
    private let stalledGauge = Gauge(label: MetricFamily.changeFeedStalled.name)
    private let gapsCounter = Counter(label: MetricFamily.changeFeedGaps.name)
    private let slotRetainedGauge = Gauge(label: MetricFamily.changeFeedSlotRetainedBytes.name)
    private let slotLostGauge = Gauge(label: MetricFamily.changeFeedSlotLost.name)
    private let outcomeCounters: [ProfileRepository.RefreshOutcome: Counter]

    public init(enabled: Bool) {
        status = Mutex(
            ChangeFeedStatus(
                state: enabled ? .starting : .disabled, detail: nil, confirmedLSN: nil, lagBytes: 0, lagSeconds: 0,
                changesApplied: 0, pendingRepairs: 0))
        var counters: [ProfileRepository.RefreshOutcome: Counter] = [:]
        for outcome in [ProfileRepository.RefreshOutcome.current, .stored, .invalidated, .absent, .failed] {
            counters[outcome] = Counter(label: MetricFamily.changeFeedChanges.name, dimensions: [("outcome", outcome.rawValue)])
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

