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

/// What the feed knows of the database it streams, to notice when another one is behind the same
/// address (docs/design.md §3.7).
struct DatabaseWatch {
    private(set) var known: LogicalReplicationSetup.DatabaseIdentity?

    /// Records what the database says now; `seen` is the furthest position the feed saw it at.
    /// - Returns: the gap, when it is not the same database going forward.
    mutating func observe(_ now: LogicalReplicationSetup.DatabaseIdentity, seen: LSN) -> FeedGap? {
        guard let known else {
            self.known = now
            return nil
        }
        var change: String?
        let furthest = max(known.position, seen)
        if known.systemIdentifier != now.systemIdentifier {
            change = "system identifier \(known.systemIdentifier) → \(now.systemIdentifier): another cluster"
        } else if known.timeline != now.timeline {
            change = "timeline \(known.timeline) → \(now.timeline): a failover or point-in-time recovery"
        } else if now.position < furthest {
            change = "WAL position \(now.position) is before \(furthest), already seen: restored from a backup"
        }
        var latest = now
        if change == nil { latest.position = max(now.position, furthest) }
        self.known = latest
        return change.map { .databaseReplaced($0, lastSeenAlive: known.observedAt) }
    }

    /// Notes that the same database is alive and going forward now, without judging a change
    /// (the next ``observe(_:seen:)`` does that).
    mutating func refresh(_ now: LogicalReplicationSetup.DatabaseIdentity) {
        guard let known, known.systemIdentifier == now.systemIdentifier, known.timeline == now.timeline,
            now.position >= known.position
        else { return }
        self.known = now
    }
}

/// Counts the stream's refusals at one position: a refusal that repeats where the slot stands is
/// not going to go away by itself (docs/design.md §3.7).
struct RepeatedRefusals {
    /// Refusals in a row at one position that make a gap.
    static let limit = 3
    private(set) var position: LSN?
    private(set) var count = 0

    /// Records a refusal at `position`; true once it is the ``limit``-th in a row there.
    mutating func record(at position: LSN) -> Bool {
        if position == self.position {
            count += 1
        } else {
            self.position = position
            count = 1
        }
        return count >= Self.limit
    }

    mutating func reset() {
        position = nil
        count = 0
    }
}

extension PostgresError {
    /// The server answered and refused (it did not merely go away): a SQLSTATE outside the
    /// classes of a lost connection (08), an operator's shutdown (57), a lack of resources (53),
    /// and not "the slot is in use" (55006).
    var isRefusal: Bool {
        guard let state = sqlState else { return false }
        return !["08", "57", "53"].contains(state.errorClass) && state != .objectInUse
    }
}
