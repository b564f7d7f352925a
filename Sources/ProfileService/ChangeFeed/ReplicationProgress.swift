import PostgresClient

/// How far the change feed may tell PostgreSQL it has gone — the rule of docs/design.md §3.3,
/// "never confirm a position past a change memcached does not have" — as a value: events in,
/// positions out, no I/O. ``ChangeFeedConsumer`` feeds it what the stream and the repairs did
/// and sends what ``reportable(heldBack:)`` returns.
///
/// - `applied`: every change up to here is in memcached, or held by ``PendingRepairs`` (which
///   then holds the reportable position back to before it).
/// - `serverEnd`: the furthest WAL position the server reported; `serverEnd - confirmed` is the lag.
/// - `confirmed`: the position last sent; it only grows (until the database is replaced).
struct ReplicationProgress: Equatable {
    private(set) var applied = LSN.zero
    private(set) var serverEnd = LSN.zero
    private(set) var confirmed = LSN.zero
    /// A transaction has begun on the stream and not yet committed.
    private(set) var inTransaction = false

    /// WAL data or a keepalive reported the server's end of WAL.
    mutating func received(walEnd: LSN) {
        serverEnd = max(serverEnd, walEnd)
    }

    mutating func transactionBegan() { inTransaction = true }

    mutating func transactionCommitted() { inTransaction = false }

    /// A keepalive at `walEnd`: everything before it has arrived. With no transaction open, none
    /// waiting to be applied and no repair held, the position moves up to it — the WAL of other
    /// tables need not be kept — and never otherwise: a change still on its way to memcached is
    /// before it.
    mutating func keepalive(walEnd: LSN, transactionsWaiting: Bool, repairsHeld: Bool) {
        received(walEnd: walEnd)
        if !inTransaction, !transactionsWaiting, !repairsHeld { applied = max(applied, walEnd) }
    }

    /// A batch of transactions, the last ending at `endLSN`, was refreshed in memcached (its
    /// failures are held as repairs). Set, not raised: transactions replayed after a reconnect
    /// bring the position back to theirs.
    mutating func appliedTransactions(through endLSN: LSN) {
        applied = endLSN
    }

    /// The position that may be confirmed now: what was applied, but never past the oldest held
    /// repair (`heldBack`: the position before it).
    func reportable(heldBack: LSN?) -> LSN {
        min(applied, heldBack ?? applied)
    }

    /// Whether `position` would move the confirmed position.
    func advances(to position: LSN) -> Bool { position > confirmed }

    /// `position` was sent to the server.
    mutating func confirmed(_ position: LSN) {
        confirmed = max(confirmed, position)
    }

    /// The database was replaced (a restore, a failover): positions of the old one mean nothing.
    mutating func reset() {
        self = ReplicationProgress()
    }
}
