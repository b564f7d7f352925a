import PostgresClient

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
