public import PostgresClient

/// The replication slots of the cache clusters of one database (docs/design.md §3.10), as the
/// feed, `migrate` and `cache-cluster` find them: only slots of the connection's database, each
/// named for its database or the way slots were named before.
///
/// A cluster streams the slot of the older name (``CacheCluster/legacySlotName``) where this
/// database has one, so that instances of the version before and after it stream one slot during a
/// rolling upgrade; otherwise the slot named for its database
/// (``CacheCluster/slotName(inDatabase:)``), which is created when missing.
public enum CacheClusterSlots {
    /// The slot `cluster` streams in the connection's database.
    ///
    /// - Throws: ``PostgresError``.
    public static func slotName(for cluster: CacheCluster, on connection: PostgresConnection) throws -> String {
        try slotName(for: cluster, inDatabase: LogicalReplicationSetup.databaseOID(on: connection), on: connection)
    }

    /// The slot `cluster` streams in the connection's database, whose `pg_database.oid` is `databaseOID`.
    static func slotName(
        for cluster: CacheCluster, inDatabase databaseOID: UInt32, on connection: PostgresConnection
    ) throws -> String {
        if try LogicalReplicationSetup.slotStatus(named: cluster.legacySlotName, on: connection) != nil {
            return cluster.legacySlotName
        }
        return cluster.slotName(inDatabase: databaseOID)
    }

    /// Every cache cluster's slot in the connection's database, in slot name order.
    ///
    /// - Throws: ``PostgresError``.
    public static func list(on connection: PostgresConnection) throws -> [(cluster: CacheCluster, slot: LogicalReplicationSetup.NamedSlot)] {
        let slots = try LogicalReplicationSetup.slots(namedLike: CacheCluster.slotPattern, on: connection)
        guard !slots.isEmpty else { return [] }
        return clusters(of: slots, inDatabase: try LogicalReplicationSetup.databaseOID(on: connection))
    }

    /// The slots among `slots` (all of the database `databaseOID`) that are cache clusters'.
    static func clusters(
        of slots: [LogicalReplicationSetup.NamedSlot], inDatabase databaseOID: UInt32
    ) -> [(cluster: CacheCluster, slot: LogicalReplicationSetup.NamedSlot)] {
        slots.compactMap { slot in CacheCluster(slotName: slot.name, inDatabase: databaseOID).map { ($0, slot) } }
    }
}
