import PostgresClient

/// A gap in what the cache saw of the commit stream: changes that were committed but will never
/// be decoded for this slot. Every gap is closed the same way (docs/design.md §3.7): the slot
/// resumes at a position taken now, every memcached node is flushed, and only then does the
/// stream go on from there.
enum FeedGap: Equatable, CustomStringConvertible {
    /// The slot does not exist: dropped by an operator, or the database was restored or failed
    /// over (PostgreSQL 15 carries no logical slot to a standby).
    case slotMissing
    /// PostgreSQL invalidated the slot: it fell more than `max_slot_wal_keep_size` behind.
    case slotLost
    /// The database behind the address is not the one the feed streamed: a different cluster,
    /// a new timeline (a failover, a point-in-time recovery), or its WAL went back (a restore
    /// from a backup). Whatever the cache holds may be content it no longer has.
    case databaseReplaced(String, lastSeenAlive: String)
    /// The server refuses to send the change at `position` — a publication missing at that
    /// position (dropped and created again), or any refusal repeated there.
    case undecodable(position: LSN, reason: String)

    var description: String {
        switch self {
        case .slotMissing: "the replication slot is missing (dropped, or the database was restored or failed over)"
        case .slotLost: "the replication slot was invalidated (max_slot_wal_keep_size exceeded)"
        case .databaseReplaced(let how, _): "the database changed under the service (\(how))"
        case .undecodable(let position, let reason): "the change at \(position) cannot be decoded (\(reason))"
        }
    }
}
