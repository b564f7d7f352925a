internal import CLibPQ
public import Logging
import ServiceRuntime

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One libpq connection, owned by one thread.
///
/// libpq's connections are not thread-safe ("One thread restriction is that no two threads
/// attempt to manipulate the same PGconn object at the same time", libpq 34.19), so each worker
/// thread owns its own `PostgresConnection`. The connection records the thread of its first use
/// and every later call checks it with `precondition`. Calls block that thread: libpq runs in
/// blocking mode, which is the design (a fixed set of worker threads; README, "Architecture").
///
/// It connects lazily (or on ``connect()``) and prepares every declared ``PostgresStatement`` on
/// each new session. When the connection is lost (`PQstatus` is `CONNECTION_BAD`) it is
/// dropped with `PQfinish`; the next call reconnects. A failed connect marks the server down in
/// its ``PostgresServerHealth`` (shared by every connection to it): while the backoff lasts,
/// calls fail at once with ``PostgresError/Kind/connectionUnavailable`` instead of waiting for
/// another `connect_timeout`, one connection at a time probes the server, and once one connects
/// all of them do.
///
/// ```swift
/// let connection = PostgresConnection(configuration: configuration, statements: [.selectProfile], logger: logger)
/// defer { connection.close() }
/// let result = try connection.execute(.selectProfile, [userID])
/// ```
///
/// - Important: Call ``close()`` on the owning thread when done. `deinit` treats a connection
///   still open as a leak (the rule of every C handle owner, `PGConnectionHandle`): it fails an
///   assertion in debug builds and closes it in release builds, never waiting for the server.
///
/// Related libpq documentation: <https://www.postgresql.org/docs/15/libpq-connect.html>
public final class PostgresConnection {
    private let configuration: PostgresConfiguration
    private let statements: [PostgresStatement]
    private let logger: Logger

    /// The session, `nil` when not connected. Only this class (and its extensions) touches it.
    private var session: PGConnectionHandle?
    /// The session's `PGconn`, lent for libpq calls on the owner thread.
    private var pgConnection: OpaquePointer? { session?.pointer }
    /// SQL of the statements prepared on the current session, by name.
    private var preparedSQL: [String: String] = [:]
    /// The thread of the first call; every later call must come from it.
    var ownerThread = OwnerThread("PostgresConnection")
    private let health: PostgresServerHealth
    /// How many sessions were lost; tells a lost connection apart from a failed connect.
    private var lostConnections = 0
    /// How many sessions this connection has opened: what one session showed (a standby's replay
    /// position, say) holds for later calls only while this has not changed.
    public private(set) var sessionsOpened = 0
    private var transaction = TransactionState.none
    private var isClosed = false

    private enum TransactionState {
        case none
        case active
        /// The session broke inside ``withTransaction(_:)``: no reconnecting until it returns,
        /// or the rest of the body would run outside the transaction.
        case lost
    }

    /// Creates a connection; nothing is sent until the first call or ``connect()``.
    ///
    /// - Parameters:
    ///   - configuration: Where to connect, with timeouts.
    ///   - statements: Statements to prepare on every new session.
    ///   - health: The server's health, shared by every connection to it; by default this
    ///     connection's own.
    ///   - logger: Receives connects, losses and failures with SQLSTATE and statement name, never
    ///     parameter values.
    public init(
        configuration: PostgresConfiguration, statements: [PostgresStatement], health: PostgresServerHealth? = nil,
        logger: Logger
    ) {
        self.configuration = configuration
        self.statements = statements
        self.health = health ?? PostgresServerHealth()
        self.logger = logger
    }

    /// Connects now (unless connected) and prepares all declared statements.
    ///
    /// A statement that fails to prepare (say its table does not exist yet) is logged and
    /// prepared again when first executed, so that a connection can run migrations.
    ///
    /// - Throws: ``PostgresError`` of kind ``PostgresError/Kind/connectionUnavailable`` when the
    ///   server cannot be reached or the connection is in backoff.
    public func connect() throws {
        ownerThread.check()
        _ = try connection()
    }

    /// Whether a session is open and libpq reports it `CONNECTION_OK`.
    public var isConnected: Bool {
        ownerThread.check()
        guard let pgConnection else { return false }
        return PQstatus(pgConnection) == CONNECTION_OK
    }

    /// Executes a declared statement with text-format parameters; `nil` is SQL `NULL`.
    ///
    /// Prepares the statement first if this session has not (and again if the server answers
    /// SQLSTATE 26000 outside a transaction). If the connection is lost during the call, it
    /// reconnects and runs the statement once more, only when `statement.isIdempotent` and no
    /// transaction was open: a write may have committed before the connection broke.
    ///
    /// - Throws: ``PostgresError``.
    public func execute(_ statement: PostgresStatement, _ parameters: [(any PostgresEncodable)?]) throws
        -> PostgresQueryResult
    {
        ownerThread.check()
        let wasInTransaction = transaction != .none || isInServerTransaction
        // A statement that is not retried must not be the one that finds out the session died
        // while it sat in the pool (a restart, a failover, idle_session_timeout).
        if !statement.isIdempotent && !wasInTransaction { dropSessionEndedByServer() }
        let lostBefore = lostConnections
        do {
            return try executeOnce(statement, parameters)
        } catch let error as PostgresError
            where error.kind == .connectionUnavailable && lostConnections != lostBefore
            && statement.isIdempotent && !wasInTransaction
        {
            logger.notice(
                "PostgreSQL connection lost; retrying the idempotent statement once",
                metadata: ["postgres.statement": "\(statement.name)"])
            return try executeOnce(statement, parameters)
        }
    }

    /// Runs SQL with the simple-query protocol (`PQexec`): several statements separated by `;`,
    /// no parameters, never retried. Returns the last statement's result.
    ///
    /// libpq: "If the query string contains multiple SQL commands, PQexec returns the result of
    /// the last command … the commands are executed as a single transaction, unless there are
    /// explicit BEGIN/COMMIT commands". `COPY` is not supported.
    ///
    /// - Throws: ``PostgresError``.
    @discardableResult
    public func simpleQuery(_ sql: String) throws -> PostgresQueryResult {
        ownerThread.check()
        let pgConnection = try connection()
        return try awaitResult(on: pgConnection, statementName: nil) { PQsendQuery($0, sql) }.copyOut()
    }

    /// Runs `body` between `BEGIN` and `COMMIT`; `ROLLBACK` if it throws.
    ///
    /// If a statement in `body` failed but `body` returned anyway, the server has already aborted
    /// the transaction (`COMMIT` would silently roll back), so this rolls back and throws
    /// SQLSTATE 25P02. If the connection is lost inside, later calls in `body` fail with
    /// ``PostgresError/Kind/connectionUnavailable`` rather than reconnect outside the transaction.
    /// Transactions do not nest.
    ///
    /// - Throws: What `body` throws, or ``PostgresError``.
    public func withTransaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        ownerThread.check()
        precondition(transaction == .none, "PostgresConnection.withTransaction does not nest")
        try simpleQuery("BEGIN")
        transaction = .active
        defer { transaction = .none }
        let value: T
        do {
            value = try body(self)
        } catch {
            rollbackIfOpen()
            throw error
        }
        if let pgConnection, PQtransactionStatus(pgConnection) == PQTRANS_INERROR {
            rollbackIfOpen()
            throw PostgresError(
                kind: .other, sqlState: .inFailedSQLTransaction,
                message: "the transaction was aborted by an earlier error and has been rolled back")
        }
        try simpleQuery("COMMIT")
        return value
    }

    /// Runs `SELECT 1` (bounded by `statement_timeout`); `false` on any failure, including backoff.
    /// For readiness checks.
    public func checkHealth() -> Bool {
        ownerThread.check()
        guard let result = try? simpleQuery("SELECT 1") else { return false }
        return result.rows.first?.values.first == "1"
    }

    /// Lets another thread use the connection from now on; call it on the owning thread when
    /// handing the connection over (``PostgresConnectionPool`` does as each borrow ends).
    public func releaseOwnerThread() {
        ownerThread.release()
    }

    /// Closes the session (`PQfinish`). Later calls fail with
    /// ``PostgresError/Kind/connectionUnavailable``. Calling it twice is harmless.
    public func close() {
        ownerThread.check()
        if let session {
            session.close()
            self.session = nil
            preparedSQL = [:]
            logger.debug("PostgreSQL connection closed")
        }
        isClosed = true
    }
}

// Owns a libpq PGconn, which must be used by one thread at a time.
@available(*, unavailable)
extension PostgresConnection: Sendable {}

extension PostgresConnection {
    private var isInServerTransaction: Bool {
        guard let pgConnection else { return false }
        return PQtransactionStatus(pgConnection) != PQTRANS_IDLE
    }

    /// The open session, connecting first if there is none.
    ///
    /// While the shared health says the server is down (a connect failed, or a statement got no
    /// answer in time on any connection), an idle session is suspect too: it is dropped, and the
    /// call fails fast or probes like a connect — instead of each thread sending to a server that
    /// does not answer and waiting out its own deadline (docs/design.md §5.2).
    func connection() throws -> OpaquePointer {
        if let pgConnection {
            guard health.isDown, transaction != .active else { return pgConnection }
            dropConnection()
        }
        if isClosed {
            throw PostgresError(kind: .connectionUnavailable, message: "the connection was closed")
        }
        if transaction == .lost {
            throw PostgresError(kind: .connectionUnavailable, message: "the connection was lost inside a transaction")
        }
        if health.admitConnect(at: .now) == .failFast {
            throw PostgresError(kind: .connectionUnavailable, message: "reconnecting to PostgreSQL is in backoff")
        }
        let newSession: PGConnectionHandle
        do {
            newSession = try PGConnectionHandle.connect(conninfo: configuration.conninfo)
        } catch {
            let wasDown = health.isDown
            let delay = health.recordConnectFailure(at: .now, reason: error.message)
            // Once per outage at warning; the probes that follow (a few a second) at debug.
            // libpq's reason names the cause (refused, authentication, certificate) and never
            // the password.
            logger.log(
                level: wasDown ? .debug : .warning, "PostgreSQL connection failed",
                metadata: ["postgres.error": "\(error.message)", "postgres.retry_in_ms": "\(delay.milliseconds)"])
            throw error
        }
        session = newSession
        sessionsOpened += 1
        let newConnection = newSession.pointer
        preparedSQL = [:]
        health.recordConnected()
        logger.info("PostgreSQL connected", metadata: ["postgres.statements": "\(statements.count)"])
        for statement in statements where !configuration.isPooled {
            do {
                try prepare(statement, on: newConnection)
            } catch let error as PostgresError where error.kind != .connectionUnavailable {
                logger.warning(
                    "PostgreSQL statement not prepared; will prepare on first use",
                    metadata: [
                        "postgres.statement": "\(statement.name)",
                        "postgres.sqlstate": "\(error.sqlState?.rawValue ?? "none")",
                    ])
            }
        }
        guard let pgConnection else {
            throw PostgresError(kind: .connectionUnavailable, message: "the connection was lost while preparing")
        }
        return pgConnection
    }

    private func prepare(_ statement: PostgresStatement, on pgConnection: OpaquePointer) throws {
        if let sql = preparedSQL[statement.name] {
            precondition(sql == statement.sql, "two PostgresStatements are named \"\(statement.name)\"")
            return
        }
        // Nothing runs on a prepare: it may give up on a silent server like a read.
        _ = try awaitResult(on: pgConnection, statementName: statement.name, givesUpOnSilence: true) {
            PQsendPrepare($0, statement.name, statement.sql, 0, nil)
        }
        preparedSQL[statement.name] = statement.sql
    }

    private func executeOnce(_ statement: PostgresStatement, _ parameters: [(any PostgresEncodable)?]) throws
        -> PostgresQueryResult
    {
        let pgConnection = try connection()
        if configuration.isPooled { return try executeUnnamed(statement, parameters, on: pgConnection).copyOut() }
        try prepare(statement, on: pgConnection)
        do {
            return try executePrepared(statement, parameters, on: pgConnection).copyOut()
        } catch let error as PostgresError
            where error.sqlState == .invalidSQLStatementName && self.pgConnection != nil && !isInServerTransaction
        {
            // The session lost its prepared statements (DEALLOCATE, a pooler, a reset): nothing ran,
            // so prepare again and run it once more. Inside a transaction the error has already
            // aborted it, so it is thrown instead.
            logger.notice(
                "PostgreSQL prepared statement missing (26000); preparing again",
                metadata: ["postgres.statement": "\(statement.name)"])
            preparedSQL[statement.name] = nil
            try prepare(statement, on: pgConnection)
            return try executePrepared(statement, parameters, on: pgConnection).copyOut()
        }
    }

    private func executePrepared(
        _ statement: PostgresStatement, _ parameters: [(any PostgresEncodable)?], on pgConnection: OpaquePointer
    ) throws -> PostgresResultHandle {
        try withTextValues(parameters) { values in
            try awaitResult(on: pgConnection, statementName: statement.name, givesUpOnSilence: statement.isIdempotent) {
                PQsendQueryPrepared($0, statement.name, Int32(parameters.count), values, nil, nil, 0)
            }
        }
    }

    /// Through a pooler: the statement unnamed, parsed, bound and run in one round trip
    /// (`PQsendQueryParams`), so that no server connection needs to know it beforehand.
    private func executeUnnamed(
        _ statement: PostgresStatement, _ parameters: [(any PostgresEncodable)?], on pgConnection: OpaquePointer
    ) throws -> PostgresResultHandle {
        try withTextValues(parameters) { values in
            try awaitResult(on: pgConnection, statementName: statement.name, givesUpOnSilence: statement.isIdempotent) {
                PQsendQueryParams($0, statement.sql, Int32(parameters.count), nil, values, nil, nil, 0)
            }
        }
    }

    /// Text parameters as NUL-terminated copies, freed after `body`; NULL for SQL NULL.
    private func withTextValues<T>(
        _ parameters: [(any PostgresEncodable)?], _ body: ([UnsafePointer<CChar>?]) throws -> T
    ) throws -> T {
        let copies: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.map { strdup($0.postgresText) } }
        defer { for copy in copies { free(copy) } }
        return try body(copies.map { $0.map { UnsafePointer($0) } })
    }

    /// Sends a command with `send` (a `PQsend…` call) and collects its results, waiting for the
    /// server at most ``PostgresConfiguration/responseDeadline`` (docs/design.md §5.3): libpq's
    /// blocking calls wait for ever on a server that is stopped or cut off, since its own
    /// `statement_timeout` never runs then. Returns the first failed result, else the last one
    /// (what `PQexec` returns for several statements).
    ///
    /// Past the deadline the session is dropped — the command may still run, or have run, so a
    /// write's outcome is unknown, as for any lost connection — and the shared health marks the
    /// server down so that the other connections fail fast until a probe gets an answer.
    ///
    /// - Parameter givesUpOnSilence: a read (or a prepare) also gives up, the same way, once the
    ///   server has answered no connection for the health's ``PostgresServerHealth/silenceLimit``:
    ///   it learns "unavailable" within a second of the server stopping, not at the deadline.
    ///   A write waits for the deadline: giving up leaves its outcome unknown.
    private func awaitResult(
        on pgConnection: OpaquePointer, statementName: String?, givesUpOnSilence: Bool = false,
        _ send: (OpaquePointer) -> Int32
    ) throws -> PostgresResultHandle {
        guard send(pgConnection) == 1 else { return try check(nil, on: pgConnection, statementName: statementName) }
        let sentAt = ContinuousClock.now
        let deadline = sentAt + configuration.responseDeadline
        // How long one poll waits before the health is asked whether everyone's answers stopped.
        let slice = givesUpOnSilence ? health.silenceLimit / 4 : configuration.responseDeadline
        var chosen: PostgresResultHandle?
        while true {
            while PQisBusy(pgConnection) == 1 {
                let now = ContinuousClock.now
                let remaining = now.duration(to: deadline)
                guard remaining > .zero else { throw noAnswer(statementName, waited: configuration.responseDeadline) }
                if givesUpOnSilence, health.isSilent(toStatementSentAt: sentAt, at: now) {
                    throw noAnswer(statementName, waited: sentAt.duration(to: now), fromAnyConnection: true)
                }
                var descriptor = pollfd(fd: PQsocket(pgConnection), events: Int16(POLLIN), revents: 0)
                let milliseconds = Int32(clamping: max(1, min(remaining, slice).milliseconds))
                guard poll(&descriptor, 1, milliseconds) > 0 else { continue }
                health.recordAnswer(at: .now)
                if PQconsumeInput(pgConnection) == 0 { break }
            }
            guard let result = PQgetResult(pgConnection) else { break }
            let handle = PostgresResultHandle(result)
            if chosen == nil || chosen?.isSuccess == true { chosen = handle }
            if PQstatus(pgConnection) == CONNECTION_BAD { break }
        }
        return try check(chosen, on: pgConnection, statementName: statementName)
    }

    private func noAnswer(_ statementName: String?, waited: Duration, fromAnyConnection: Bool = false) -> PostgresError {
        let milliseconds = waited.milliseconds
        logger.warning(
            fromAnyConnection
                ? "PostgreSQL answered no connection in time; dropping the session"
                : "PostgreSQL did not answer in time; dropping the session",
            metadata: ["postgres.statement": "\(statementName ?? "simple query")", "postgres.waited_ms": "\(milliseconds)"])
        dropConnection()
        let message =
            fromAnyConnection
            ? "PostgreSQL answered no connection for \(milliseconds) ms"
            : "PostgreSQL did not answer within \(milliseconds) ms"
        health.recordConnectFailure(at: .now, reason: message)
        return PostgresError(kind: .connectionUnavailable, message: message, statementName: statementName)
    }

    /// Wraps a result, throwing its error; drops the session if libpq reports it `CONNECTION_BAD`.
    ///
    /// libpq: PQexec and friends return "a null pointer … in out-of-memory conditions or serious
    /// errors such as inability to send the command to the server".
    private func check(_ handle: PostgresResultHandle?, on pgConnection: OpaquePointer, statementName: String?) throws
        -> PostgresResultHandle
    {
        if let handle, handle.isSuccess { return handle }
        var error =
            handle?.error(statementName: statementName)
            ?? PostgresError(kind: .other, message: errorMessage(of: pgConnection), statementName: statementName)
        if PQstatus(pgConnection) == CONNECTION_BAD {
            error = PostgresError(
                kind: .connectionUnavailable, sqlState: error.sqlState, message: error.message, detail: error.detail,
                constraint: error.constraint, statementName: statementName)
            dropConnection()
        }
        logger.debug(
            "PostgreSQL statement failed",
            metadata: [
                "postgres.statement": "\(statementName ?? "simple query")",
                "postgres.sqlstate": "\(error.sqlState?.rawValue ?? "none")", "postgres.error": "\(error.kind)",
            ])
        throw error
    }

    /// Drops an idle session the server has ended, so the next call reconnects: one `poll` of
    /// its socket with no wait. An idle session's socket is readable only when the server sent
    /// something unasked — a FATAL before it closed (57P01 on a shutdown, 57P05 on
    /// idle_session_timeout), the close itself, or a notification, which `PQconsumeInput` keeps.
    func dropSessionEndedByServer() {
        guard let pgConnection, !isInServerTransaction else { return }
        var descriptor = pollfd(fd: PQsocket(pgConnection), events: Int16(POLLIN), revents: 0)
        // The FATAL and the close arrive together: the first read takes the message, a later
        // one finds the end of the stream and marks the session bad.
        var reads = 0
        while descriptor.fd >= 0, reads < 4, poll(&descriptor, 1, 0) > 0, PQstatus(pgConnection) == CONNECTION_OK {
            reads += 1
            if PQconsumeInput(pgConnection) == 0 { break }
        }
        if reads > 0, PQstatus(pgConnection) != CONNECTION_OK {
            logger.info("PostgreSQL session ended by the server while idle; reconnecting before the statement")
            dropConnection()
        }
    }

    /// Forgets a broken session: `PQfinish`, and the next call reconnects.
    func dropConnection() {
        guard let session else { return }
        session.close()
        self.session = nil
        preparedSQL = [:]
        lostConnections += 1
        if transaction == .active { transaction = .lost }
        logger.warning("PostgreSQL connection lost")
    }

    private func rollbackIfOpen() {
        guard let pgConnection, PQtransactionStatus(pgConnection) != PQTRANS_IDLE else { return }
        do {
            _ = try awaitResult(on: pgConnection, statementName: nil) { PQsendQuery($0, "ROLLBACK") }
        } catch {
            logger.warning("PostgreSQL ROLLBACK failed", metadata: ["postgres.error": "\(error)"])
        }
    }

}

/// libpq's last error on `connection`, without its trailing newline (shared by every libpq wrapper).
func errorMessage(of connection: OpaquePointer) -> String {
    guard let message = PQerrorMessage(connection) else { return "unknown libpq error" }
    let text = String(cString: message).trimmingTrailingNewlines()
    return text.isEmpty ? "unknown libpq error" : text
}
