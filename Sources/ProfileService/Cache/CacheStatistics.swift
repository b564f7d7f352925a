/// What the cache protocol did, counted per event since start. Read by `/metrics` and tests.
public final class CacheStatistics: Sendable {
    public enum Event: Int, CaseIterable, Sendable {
        /// A read answered from memcached.
        case hit
        /// A read that found no usable entry.
        case miss
        /// A read answered 404 from memcached's record that the profile does not exist.
        case absentHit
        /// A read whose entry was older than its `min_version`, answered from PostgreSQL.
        case bypass
        /// A memcached failure on a read (the read went to PostgreSQL).
        case error
        /// A reader found another reader's lease and waited.
        case leaseWait
        /// A profile read from PostgreSQL's primary.
        case databaseRead
        /// Coalesced: a read that shared another read's PostgreSQL result in this process.
        case coalesced
        /// A coalesced reader waited ``ProfileCacheConfiguration/coalescedWait`` in vain: 503.
        case coalescedWaitExpired
        /// A reader found every waiting slot taken (``ProfileCacheConfiguration/maximumCoalescedWaiters``): 503.
        case coalescedWaitRefused
        case populateStored
        /// The populate's lease was replaced (a write) or removed (an eviction) meanwhile.
        case populateLost
        /// No lease could be taken, so the row was not stored.
        case populateSkipped
        /// A row read from PostgreSQL, about to be answered, was stored over a lease or an older
        /// entry first (monotonic reads, docs/design.md §2.9).
        case settleStored
        /// A lease found after a PostgreSQL read was deleted before the row was answered: its
        /// reader may have read an older row.
        case settleInvalidated
        case writeThroughStored
        case writeThroughSkippedNewer
        case writeThroughCASConflict
        case writeThroughDeleted
        case writeThroughFailed
        /// One query that read several profiles (a list's misses); each is a `databaseRead` too.
        case databaseBatchRead
        /// One statement that made several requests' updates (docs/design.md §9.4).
        case databaseBatchWrite
        /// A profile read from a standby instead of the primary (docs/design.md §8).
        case standbyRead
        /// A standby had not replayed the read's position: the primary answered.
        case standbyBehind
        /// A standby's row did not meet the read's floor: the primary answered.
        case standbyBelowFloor
        /// No standby could be asked (none usable, each failed, no position in time).
        case standbyUnavailable
        /// The primary's WAL position read for standby reads (one serves every read that began before it).
        case primaryPosition
        /// A lookup by handle answered by its entry and the profile it names (docs/design.md §12).
        case handleHit
        /// A lookup by handle answered 404 from memcached's record that no one holds it.
        case handleAbsentHit
        /// A handle PostgreSQL was asked about (its entry proved nothing: none, stale, a floor).
        case handleDatabaseRead
    }

    private let counters = EventCounters<Event>(.cacheEvents, label: \.metricName, position: \.rawValue)

    public init() {}

    func record(_ event: Event) {
        counters.record(event)
    }

    /// `count` events at once (a list's hits: one atomic add, not one per member).
    func record(_ event: Event, count: Int) {
        counters.record(event, count: count)
    }

    public func count(_ event: Event) -> Int {
        counters.count(event)
    }

    /// Every counter, for snapshots in tests and metrics.
    public var snapshot: [Event: Int] {
        Dictionary(uniqueKeysWithValues: Event.allCases.map { ($0, count($0)) })
    }
}

extension CacheStatistics.Event {
    /// The `event` label of `profile_service_cache_events_total`.
    public var metricName: String {
        switch self {
        case .hit: "hit"
        case .miss: "miss"
        case .absentHit: "absent_hit"
        case .bypass: "bypass"
        case .error: "error"
        case .leaseWait: "lease_wait"
        case .databaseRead: "database_read"
        case .coalesced: "coalesced"
        case .coalescedWaitExpired: "coalesced_wait_expired"
        case .coalescedWaitRefused: "coalesced_wait_refused"
        case .populateStored: "populate_stored"
        case .populateLost: "populate_lost"
        case .populateSkipped: "populate_skipped"
        case .settleStored: "settle_stored"
        case .settleInvalidated: "settle_invalidated"
        case .writeThroughStored: "write_through_stored"
        case .writeThroughSkippedNewer: "write_through_skipped_newer"
        case .writeThroughCASConflict: "write_through_cas_conflict"
        case .writeThroughDeleted: "write_through_deleted"
        case .writeThroughFailed: "write_through_failed"
        case .databaseBatchRead: "database_batch_read"
        case .databaseBatchWrite: "database_batch_write"
        case .standbyRead: "standby_read"
        case .standbyBehind: "standby_behind"
        case .standbyBelowFloor: "standby_below_floor"
        case .standbyUnavailable: "standby_unavailable"
        case .primaryPosition: "primary_position"
        case .handleHit: "handle_hit"
        case .handleAbsentHit: "handle_absent_hit"
        case .handleDatabaseRead: "handle_database_read"
        }
    }
}
