import PostgresClient
import ServiceRuntime

/// Whether the commits the change feed received are visible to other sessions yet.
///
/// PostgreSQL makes a commit durable (its WAL record flushed) before it makes it visible to new
/// snapshots (the backend leaves the proc array a moment later), and logical decoding may deliver
/// the commit in between — under CPU pressure, tens of milliseconds before. A repair applied in
/// that window writes the new version into memcached while every read of PostgreSQL still
/// returns the old one: a reader that misses after the next eviction populates the old row, and
/// a version already served goes back (docs/design.md §3.3). So the feed waits, before it
/// repairs, until a snapshot of its own sees every transaction of the batch; almost always the
/// first look says so.
enum CommitVisibility {
    /// pgoutput sends 32-bit transaction ids; `pg_visible_in_snapshot` takes 64-bit ones, made
    /// here as the 64-bit id nearest the snapshot's `xmax` with those low 32 bits (a received
    /// commit is recent; one still in progress may be at or above `xmax`).
    static let statement = PostgresStatement(
        name: "change_feed_commits_visible",
        sql: """
            WITH s AS (SELECT snap, pg_snapshot_xmax(snap)::text::bigint AS next
                       FROM (SELECT pg_current_snapshot() AS snap) current)
            SELECT coalesce(bool_and(full_xid < 3 OR pg_visible_in_snapshot(full_xid::text::xid8, s.snap)), true) AS visible
            FROM s, LATERAL (
                SELECT s.next + d - CASE WHEN d > 2147483648 THEN 4294967296
                                         WHEN d < -2147483648 THEN -4294967296 ELSE 0 END AS full_xid
                FROM (SELECT x - (s.next & 4294967295) AS d FROM unnest($1::bigint[]) AS x) offsets) ids
            """,
        isIdempotent: true)

    /// Waits until every transaction of `xids` is visible to a new snapshot, looking every
    /// millisecond for at most `limit`. Returns whether they were seen; `false` also when the
    /// question cannot be asked (the repair then goes ahead, as it always did).
    static func wait(for xids: [UInt32], on connection: PostgresConnection, limit: Duration) -> Bool {
        let ids = "{" + Set(xids).map(String.init).joined(separator: ",") + "}"
        let deadline = ContinuousClock.now + limit
        while true {
            guard let visible: Bool = try? connection.execute(statement, [ids]).rows.first?.decode("visible") else {
                return false
            }
            if visible { return true }
            if ContinuousClock.now >= deadline { return false }
            sleepThread(for: .milliseconds(1))
        }
    }
}
