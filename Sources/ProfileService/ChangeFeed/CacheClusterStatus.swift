import PostgresClient

/// A cache cluster's change feed as PostgreSQL shows it to any instance (docs/design.md §3.10):
/// read from the cluster's replication slot, so an instance of one cluster reports the others too,
/// and a cluster whose instances are all gone is still seen — by the WAL its slot keeps.
public struct CacheClusterStatus: Sendable, Equatable {
    public var cluster: CacheCluster
    /// The cluster's slot in this database (docs/design.md §3.10 says how it is named).
    public var slot: String
    /// Whether a session streams the cluster's slot now: its consumer lives.
    public var isConsumed: Bool
    /// The consuming session's `application_name` (the instance's host and process), when visible.
    public var consumer: String?
    /// WAL written past the position the cluster's consumer confirmed: changes it has not applied.
    public var lagBytes: Int64?
    /// WAL the server keeps for the slot (what `max_slot_wal_keep_size` bounds).
    public var retainedBytes: Int64?
    /// The slot's `wal_status` (`reserved`, `extended`, `unreserved`, `lost`).
    public var walStatus: String?
    /// How long this instance has seen the slot without a consumer, in seconds; 0 while consumed.
    /// A cluster that is gone keeps its slot and its WAL until someone drops it
    /// (`profile-service cache-cluster drop NAME`).
    public var unconsumedSeconds: Double

    init(_ cluster: CacheCluster, slot: LogicalReplicationSetup.NamedSlot, unconsumedSeconds: Double) {
        self.cluster = cluster
        self.slot = slot.name
        isConsumed = slot.status.isActive
        consumer = slot.consumer
        lagBytes = slot.status.lagBytes
        retainedBytes = slot.status.retainedBytes
        walStatus = slot.status.walStatus
        self.unconsumedSeconds = unconsumedSeconds
    }
}
