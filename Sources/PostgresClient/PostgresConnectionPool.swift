public import Logging
import ServiceRuntime

/// A fixed budget of connections to one server, shared by any number of threads: each call
/// borrows a connection for its statement and gives it back (docs/design.md §9).
///
/// Threads that wait on other servers (memcached) most of the time would each hold an idle
/// connection if they owned one; borrowing per statement lets an instance keep many requests in
/// flight over as many connections as an operator budgets for it, as a pooler would.
///
/// The budget is also the pool's ``PostgresBulkhead``: at most `size` statements wait on the
/// server at once; a call that finds every connection lent waits for one while the server makes
/// progress, and fails at once with ``PostgresError/Kind/connectionUnavailable`` once it has
/// stalled (docs/design.md §5.3) — so a stalled database holds `size` threads, never all of them.
///
/// Connections are opened lazily, each on first need, and reconnect as a
/// ``PostgresConnection`` does; they share one ``PostgresServerHealth``.
///
/// ```swift
/// let pool = PostgresConnectionPool(size: 16, configuration: c, statements: s, health: h, logger: l)
/// let rows = try pool.withConnection { try $0.execute(.selectProfile, [id]).rows }
/// pool.close()
/// ```
public final class PostgresConnectionPool: Sendable {
    /// Connections at most.
    public var size: Int { connections.capacity }
    private let connections: BorrowPool<PostgresConnection>
    private let bulkhead: PostgresBulkhead

    /// - Parameters:
    ///   - size: Connections at most (and statements in flight at most).
    ///   - stallAfter: With every connection lent and none given back for this long, the server
    ///     is stalled rather than busy, and a call that finds no free connection fails at once.
    ///     Long enough for a burst of connects across a network (a session costs several round
    ///     trips) and for a borrower that a busy machine has not scheduled yet: 50 ms refused
    ///     reads at a 1 ms round trip while PostgreSQL answered (docs/design.md §9).
    public init(
        size: Int, configuration: PostgresConfiguration, statements: [PostgresStatement], health: PostgresServerHealth,
        stallAfter: Duration = .milliseconds(250), logger: Logger
    ) {
        bulkhead = PostgresBulkhead(limit: size, stallAfter: stallAfter)
        connections = BorrowPool(
            capacity: size,
            make: { PostgresConnection(configuration: configuration, statements: statements, health: health, logger: logger) },
            handOff: { $0.releaseOwnerThread() })
    }

    /// Connections opened so far (lent or idle); at most ``size``.
    public var opened: Int { connections.made }

    /// Calls refused so far because the server was stalled and every connection was lent.
    public var refused: Int { bulkhead.refused }

    /// Runs `body` with a connection of the pool, on the calling thread. Keep `body` to the
    /// statements of one task: the connection waits on nothing else meanwhile.
    ///
    /// - Throws: What `body` throws, or ``PostgresError`` of kind
    ///   ``PostgresError/Kind/connectionUnavailable`` when the server is stalled and no
    ///   connection is free.
    public func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        guard bulkhead.enter() else {
            throw PostgresError(
                kind: .connectionUnavailable,
                message: "PostgreSQL has not answered for \(bulkhead.stallAfter) and all \(size) connections of the pool wait on it")
        }
        defer { bulkhead.leave() }
        return try connections.borrow(body)
    }

    /// Closes the idle connections; call it once the threads that borrow are done.
    public func close() {
        connections.forEachIdle { $0.close() }
    }
}
