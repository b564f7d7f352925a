import Foundation

/// Names and timings of the change feed (docs/design.md §3).
public struct ChangeFeedConfiguration: Sendable {
    /// The memcached cluster this feed repairs (docs/design.md §3.10).
    public var cluster: CacheCluster
    /// The logical replication slot: one per cache cluster and database, shared by the cluster's
    /// instances. Only one connection can stream from it at a time, which makes it the feed's
    /// leader lock. `nil`: the cluster's, as ``CacheClusterSlots/slotName(for:on:)`` finds it in
    /// the database (a test names a slot of its own).
    public var slotName: String?
    /// Where the feed says what it repaired, for the live updates of its cluster's instances.
    public var notificationChannel: String
    /// The replication session's `application_name`: which instance consumes a cluster, as
    /// `pg_stat_replication` and every instance's `/readyz` show it.
    public var consumerName: String
    /// The publication of `user_profiles` (migrations/0002_change_feed_publication.sql).
    public var publicationName = "profile_service_changes"
    /// How often an instance that is not consuming tries to take the slot over.
    public var takeoverInterval: Duration = .seconds(1)
    /// How long to wait before reconnecting after the stream broke or PostgreSQL was down.
    public var reconnectDelay: Duration = .seconds(1)
    /// How often the feed's lag is refreshed for `/readyz` and metrics while nothing new is
    /// applied. (The position itself goes to PostgreSQL when it moves; the stream repeats it
    /// while idle so the server does not time the consumer out.)
    public var monitorInterval: Duration = .seconds(1)
    /// How often changes memcached refused are tried again.
    public var retryInterval: Duration = .milliseconds(250)
    /// Transactions applied together at most; more are applied in the next batch.
    public var maxBatchTransactions = 1024
    /// Changes held in memory at once, at most (docs/design.md §3.9): batches are applied when
    /// they reach it, and a larger transaction is applied in parts of this many as it arrives,
    /// its position confirmed once its last part is. About 0.5 KiB each.
    public var maxChangesInMemory = 10_000
    /// How often a status update goes to PostgreSQL even when the position does not move — while
    /// a large transaction is worked through — so that `wal_sender_timeout` never ends the session.
    public var statusKeepAliveInterval: Duration = .seconds(5)
    /// `wal_sender_timeout` of the feed's replication session: how long PostgreSQL keeps the slot
    /// for a consumer that stopped answering without closing its connection (its host gone, a
    /// partition, a frozen process) before the walsender ends and another instance takes over.
    /// PostgreSQL's default is 60 s. Three status intervals: a consumer that works through a
    /// large transaction sends one every ``statusKeepAliveInterval``, and answers the server's
    /// keepalives at once otherwise (docs/design.md §3.3).
    public var senderTimeout: Duration = .seconds(15)
    /// How long a committed change may wait for others to be applied with it: memcached is then
    /// read in one round trip per batch, PostgreSQL notified once per batch and the feed's
    /// thread woken once per batch, not once per commit. Adds at most this to the time a change
    /// takes to reach memcached (docs/design.md §3.2).
    public var gatherDelay: Duration = .milliseconds(5)
    /// How long a batch waits, at most, for PostgreSQL to show its commits to other sessions
    /// before it repairs the cache (``CommitVisibility``, docs/design.md §3.3).
    public var visibilityWait: Duration = .seconds(1)
    /// How often the applied position is sent to PostgreSQL while it moves (it is sent at once
    /// when the server asks). Every status update wakes the walsender; a position confirmed a
    /// little late only makes a takeover replay a few more changes, which are idempotent.
    public var statusInterval: Duration = .milliseconds(100)
    /// Changes held back for a memcached node that does not answer, at most. Beyond it the feed
    /// stops reading (PostgreSQL keeps the WAL, bounded by `max_slot_wal_keep_size`) rather than
    /// forget a repair.
    public var maxPendingRepairs = 100_000
    /// How often the slot's health (`wal_status`, retained WAL) is read for metrics and `/readyz`,
    /// and this instance's memcached nodes written for the others of its cluster to see
    /// (``CacheClusterNodeSet``).
    public var slotCheckInterval: Duration = .seconds(5)
    /// How long an instance that wrote no row counts as serving its node set: a few missed
    /// ``slotCheckInterval``s. An instance that stops deletes its row at once.
    public var instanceExpiry: Duration = .seconds(30)
    /// The share of applied changes the consistency observer checks (docs/design.md §3.8); 0 turns
    /// it off.
    public var consistencySampleRate = 0.01
    /// How long after a change was applied the observer checks memcached for an older entry.
    public var consistencyCheckDelay: Duration = .seconds(2)

    public init(cluster: CacheCluster = .default) {
        self.cluster = cluster
        notificationChannel = cluster.notificationChannel
        consumerName = Self.consumerName(cluster: cluster)
    }

    /// `profile-service/<cluster>/<host>/<pid>`, within PostgreSQL's 63 bytes.
    static func consumerName(cluster: CacheCluster) -> String {
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "localhost"
        let pid = ProcessInfo.processInfo.processIdentifier
        return String("profile-service/\(cluster.name)/\(host.prefix(20))/\(pid)".utf8.prefix(63)) ?? "profile-service"
    }
}
