internal import CLibPQ
public import Logging
import ServiceRuntime

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A connection in `replication=database` mode streaming one logical replication slot with the
/// `pgoutput` plugin: PostgreSQL's committed changes, in commit order.
///
/// ```swift
/// let stream = try LogicalReplicationStream(
///     configuration: configuration, slot: "profile_cache", publication: "profile_changes", logger: logger)
/// defer { stream.close() }
/// while let message = try stream.next(timeout: .seconds(1)) {
///     switch message {
///     case .walData(_, _, _, let payload):
///         if case .commit(_, let endLSN, _) = try PgOutputDecoder.decode(payload) {
///             // … once the transaction's changes are applied:
///             try stream.sendStatus(flushed: endLSN)
///         }
///     case .keepalive(let walEnd, _, let replyRequested):
///         // Between transactions, everything before walEnd is applied: confirm it, or a server
///         // shutting down waits for wal_sender_timeout.
///         if replyRequested { try stream.sendStatus(flushed: isInTransaction ? lastAppliedEnd : walEnd) }
///     }
/// }
/// ```
///
/// Delivery is at-least-once: the server resends every transaction whose commit end the client
/// has not confirmed with ``sendStatus(flushed:replyRequested:)``, on the next stream of the slot
/// (and, after a server crash, since the slot's last checkpointed position). Only one stream can
/// use a slot at a time: a second one fails with SQLSTATE 55006 (``PostgresError/isObjectInUse``)
/// until the first closes. See docs/design.md §3.
///
/// Every error ends the stream: the connection is closed and later calls throw
/// ``PostgresError/Kind/connectionUnavailable``; make a new stream to go on.
///
/// - Important: A stream belongs to the thread that made it: every call, ``close()`` included,
///   checks that thread (`OwnerThread`), like ``PostgresConnection``. Call ``close()`` there
///   when done: it is the only place that talks to the server on the way out. `deinit` does no
///   network I/O; a stream still open there is a leak (an assertion in debug builds; in release
///   builds the connection is finished without CopyDone, and the server releases the slot once it
///   notices the closed socket).
///
/// The wire protocol is pg_recvlogical's (`src/bin/pg_basebackup/pg_recvlogical.c`): a query
/// `START_REPLICATION`, then `PQgetCopyData` in async mode for the server's messages and
/// `PQputCopyData` for status updates. The connection is put in nonblocking mode once streaming,
/// so sending a status update never waits for the server to read.
///
/// Related PostgreSQL documentation: <https://www.postgresql.org/docs/15/protocol-replication.html>
public final class LogicalReplicationStream {
    private let logger: Logger
    /// The libpq connection in COPY BOTH mode; `nil` once closed or failed. Only this class touches it.
    private var session: PGConnectionHandle?
    /// The thread that made the stream; every call must come from it.
    private var ownerThread = OwnerThread("LogicalReplicationStream")
    /// `PQflush` returned 1: libpq still holds output to send (nonblocking mode).
    private var hasPendingOutput = false
    /// How often ``next(timeout:)`` repeats the last status update on its own.
    private let statusInterval: Duration
    /// The highest position confirmed so far, repeated every `statusInterval`.
    private var confirmedLSN = LSN.zero
    private var lastStatusTime = ContinuousClock.now

    /// Connects (adding `replication=database` to the configuration's parameters) and runs
    /// `START_REPLICATION SLOT <slot> LOGICAL <startLSN> (proto_version '1', publication_names '<publication>')`.
    ///
    /// The server starts at the later of `startLSN` and the slot's confirmed position, so ``LSN/zero``
    /// means "where the last stream left off". A publication that does not exist is reported
    /// only when the first change is decoded: ``next(timeout:)`` then throws SQLSTATE 42704.
    ///
    /// - Parameters:
    ///   - configuration: Where to connect; its timeouts and TCP keepalives apply.
    ///   - slot: A logical slot made with the `pgoutput` plugin (``LogicalReplicationSetup/ensureSlot(named:on:)``).
    ///   - publication: The publication naming the tables to stream.
    ///   - startLSN: Where to start if later than the slot's confirmed position.
    ///   - statusInterval: ``next(timeout:)`` sends the last confirmed position again when no
    ///     status update went out for this long, as pg_recvlogical does (its `--status-interval`,
    ///     10 s): the server ends a stream it has not heard from in `wal_sender_timeout` (60 s by
    ///     default). Keep it well below that.
    ///   - logger: Receives start, end and failures of the stream, never row data.
    /// - Throws: ``PostgresError``: ``PostgresError/Kind/connectionUnavailable`` when the server
    ///   cannot be reached; SQLSTATE 55006 (``PostgresError/isObjectInUse``) when another
    ///   connection streams the slot; 42704 for a slot that does not exist; 55000 when the slot
    ///   is not logical or was invalidated (``LogicalReplicationSetup/SlotStatus/isLost``);
    ///   ``PostgresError/Kind/invalidConfiguration`` for a name holding a NUL.
    public init(
        configuration: PostgresConfiguration, slot: String, publication: String, startLSN: LSN = .zero,
        statusInterval: Duration = .seconds(10), logger: Logger
    ) throws {
        self.statusInterval = statusInterval
        var logger = logger
        logger[metadataKey: "postgres.slot"] = "\(slot)"
        self.logger = logger
        ownerThread.check()
        let command = try Self.startReplicationCommand(slot: slot, publication: publication, startLSN: startLSN)
        let session = try PGConnectionHandle.connect(conninfo: configuration.replicationConninfo)
        do {
            try startStreaming(on: session.pointer, command: command)
        } catch {
            session.close()
            throw error
        }
        self.session = session
        logger.info("PostgreSQL replication stream started", metadata: ["postgres.start_lsn": "\(startLSN)"])
    }

    /// Whether the stream is open: not closed, and no error has ended it.
    public var isOpen: Bool {
        ownerThread.check()
        return session != nil
    }

    /// The next message, waiting at most `timeout`; `nil` when none came in time.
    ///
    /// It also sends what an earlier ``sendStatus(flushed:replyRequested:)`` could not send at
    /// once, and repeats the last confirmed position every `statusInterval`, so a consumer that
    /// calls it in a loop stays connected while nothing happens. Timeouts above a day count as a day.
    ///
    /// - Throws: ``PostgresError``, and the stream is closed: of kind
    ///   ``PostgresError/Kind/connectionUnavailable`` when the connection breaks, the server shuts
    ///   down or ends the stream; with the server's SQLSTATE when it reports an error (say 42704,
    ///   the publication does not exist).
    public func next(timeout: Duration) throws -> ReplicationMessage? {
        let connection = try openConnection()
        let deadline = ContinuousClock.now + min(timeout, .seconds(86_400))
        var hasPolled = false
        while true {
            if ContinuousClock.now - lastStatusTime >= statusInterval {
                try sendStatus(flushed: confirmedLSN)
            }
            if hasPendingOutput { try flush(connection) }
            if let message = try bufferedMessage(connection) { return message }
            let remaining = deadline - .now
            if remaining <= .zero && hasPolled { return nil }
            let untilStatus = lastStatusTime + statusInterval - .now
            let wait = max(.zero, min(remaining, untilStatus))
            guard let events = waitForSocket(connection, writable: hasPendingOutput, timeout: wait) else {
                throw fail(connectionError(connection))
            }
            hasPolled = true
            if events & Int16(POLLIN | POLLERR | POLLHUP) != 0, PQconsumeInput(connection) == 0 {
                throw fail(connectionError(connection))
            }
        }
    }

    /// Sends a standby status update ('r'): written = flushed = applied = `flushed`, clock = now.
    ///
    /// The server then never sends again a transaction whose commit end is at or before
    /// `flushed`: confirm a commit's `endLSN` only once its changes are applied. With
    /// `replyRequested` the server answers with a keepalive.
    ///
    /// It does not wait for the server to read: what the socket does not take at once goes out
    /// during the next ``next(timeout:)``.
    ///
    /// - Throws: ``PostgresError`` of kind ``PostgresError/Kind/connectionUnavailable`` when the
    ///   connection is broken or the stream closed.
    public func sendStatus(flushed: LSN, replyRequested: Bool = false) throws {
        let connection = try openConnection()
        let update = ReplicationMessage.standbyStatusUpdate(
            written: flushed, flushed: flushed, applied: flushed, clock: .postgresNow, replyRequested: replyRequested)
        func put() -> Int32 {
            update.withUnsafeBufferPointer { bytes in
                bytes.withMemoryRebound(to: CChar.self) { PQputCopyData(connection, $0.baseAddress, Int32($0.count)) }
            }
        }
        var queued = put()
        if queued == 0 {
            // libpq: 0 means "could not queue the data because of full buffers (this will only
            // happen in nonblocking mode)". Make room, once, for a bounded time.
            try flush(connection)
            _ = waitForSocket(connection, writable: true, timeout: .seconds(1))
            try flush(connection)
            queued = put()
        }
        guard queued == 1 else { throw fail(connectionError(connection)) }
        try flush(connection)
        confirmedLSN = max(confirmedLSN, flushed)
        lastStatusTime = .now
        logger.trace("PostgreSQL replication status sent", metadata: ["postgres.flushed_lsn": "\(flushed)"])
    }

    /// Ends the stream and closes the connection, on the owner thread. Calling it twice is harmless.
    ///
    /// It ends the COPY first (CopyDone) and waits up to 2 s for the server's answer: the server
    /// releases the slot before answering, so a new stream can take the slot as soon as this
    /// returns. Status updates sent before are read by the server first.
    public func close() {
        ownerThread.check()
        guard let session else { return }
        self.session = nil
        let connection = session.pointer
        if PQstatus(connection) == CONNECTION_OK, PQputCopyEnd(connection, nil) == 1 {
            endCopy(connection, deadline: .now + .seconds(2))
        }
        session.close()
        logger.info("PostgreSQL replication stream closed")
    }
}

// Owns a libpq PGconn, which must be used by one thread at a time.
@available(*, unavailable)
extension LogicalReplicationStream: Sendable {}

extension LogicalReplicationStream {
    /// `START_REPLICATION SLOT "slot" LOGICAL X/Y (proto_version '1', publication_names '"publication"')`.
    ///
    /// The slot is a double-quoted identifier of the replication grammar; the publication list is a
    /// string literal (quotes doubled) holding a double-quoted identifier (quotes doubled), which
    /// the server splits with `SplitIdentifierString`. A NUL would cut the command short in C.
    static func startReplicationCommand(slot: String, publication: String, startLSN: LSN) throws -> String {
        guard !slot.contains("\0"), !publication.contains("\0") else {
            throw PostgresError(kind: .invalidConfiguration, message: "a slot or publication name contains NUL")
        }
        let publicationList = quoteLiteral(quoteIdentifier(publication))
        return "START_REPLICATION SLOT \(quoteIdentifier(slot)) LOGICAL \(startLSN) "
            + "(proto_version '1', publication_names \(publicationList))"
    }

    static func quoteIdentifier(_ name: String) -> String {
        "\"" + name.replacing("\"", with: "\"\"") + "\""
    }

    static func quoteLiteral(_ text: String) -> String {
        "'" + text.replacing("'", with: "''") + "'"
    }

    /// Runs `START_REPLICATION` on a new session and puts it in nonblocking mode; the caller
    /// closes the session when this throws.
    private func startStreaming(on connection: OpaquePointer, command: String) throws(PostgresError) {
        guard let result = PQexec(connection, command) else { throw connectionError(connection) }
        let status = PQresultStatus(result)
        let handle = PostgresResultHandle(result)
        guard status == PGRES_COPY_BOTH else {
            var error = handle.error(statementName: nil)
            if PQstatus(connection) == CONNECTION_BAD { error = error.asConnectionUnavailable }
            // A slot in use is the normal answer to a standby that retries every second: the
            // caller decides what is worth saying; the library says it only at debug level.
            logger.log(
                level: error.isObjectInUse ? .debug : .warning, "PostgreSQL replication stream refused",
                metadata: ["postgres.sqlstate": "\(error.sqlState?.rawValue ?? "none")"])
            throw error
        }
        // libpq: "PQexec does not honor nonblocking mode", so this comes after START_REPLICATION.
        guard PQsetnonblocking(connection, 1) == 0 else { throw connectionError(connection) }
    }

    /// Checks the owner thread and returns the open connection.
    private func openConnection() throws -> OpaquePointer {
        ownerThread.check()
        guard let session else {
            throw PostgresError(kind: .connectionUnavailable, message: "the replication stream is closed")
        }
        return session.pointer
    }

    /// A whole message libpq has already read, or `nil`.
    private func bufferedMessage(_ connection: OpaquePointer) throws -> ReplicationMessage? {
        var buffer: UnsafeMutablePointer<CChar>? = nil
        // libpq: with async, "PQgetCopyData will not block waiting for input; it will return zero
        // if the COPY is still in progress but no complete row is available"; -1 "indicates that
        // the COPY is done", -2 "that an error occurred". The buffer is freed with PQfreemem.
        let length = PQgetCopyData(connection, &buffer, 1)
        switch length {
        case 0:
            return nil
        case -1:
            throw fail(endOfStreamError(connection))
        case ..<0:
            throw fail(connectionError(connection))
        default:
            guard let buffer else { throw fail(connectionError(connection)) }
            defer { PQfreemem(buffer) }
            let bytes = [UInt8](UnsafeRawBufferPointer(start: buffer, count: Int(length)))
            guard let message = ReplicationMessage(copyData: bytes) else {
                let kind = bytes.first.map { String($0) } ?? "none"
                throw fail(PostgresError(kind: .other, message: "unexpected replication message (first byte \(kind))"))
            }
            return message
        }
    }

    /// The server ended the COPY: its final result says why (an error, or a shutdown).
    private func endOfStreamError(_ connection: OpaquePointer) -> PostgresError {
        guard waitUntilNotBusy(connection, deadline: .now + .seconds(1)), let result = PQgetResult(connection) else {
            return connectionError(connection)
        }
        let status = PQresultStatus(result)
        let handle = PostgresResultHandle(result)
        if status == PGRES_FATAL_ERROR {
            let error = handle.error(statementName: nil)
            return PQstatus(connection) == CONNECTION_BAD ? error.asConnectionUnavailable : error
        }
        return PostgresError(kind: .connectionUnavailable, message: "the server ended the replication stream")
    }

    private func connectionError(_ connection: OpaquePointer) -> PostgresError {
        PostgresError(kind: .connectionUnavailable, message: errorMessage(of: connection))
    }

    /// Closes the connection after an error and returns the error to throw.
    private func fail(_ error: PostgresError) -> PostgresError {
        session?.close()
        session = nil
        logger.warning(
            "PostgreSQL replication stream ended",
            metadata: ["postgres.sqlstate": "\(error.sqlState?.rawValue ?? "none")", "postgres.error": "\(error.kind)"])
        return error
    }

    /// libpq: "PQflush … Returns 0 if successful (or if the send queue is empty), -1 if it failed
    /// for some reason, or 1 if it was unable to send all the data in the send queue yet (this
    /// case can only occur if the connection is nonblocking)."
    private func flush(_ connection: OpaquePointer) throws {
        switch PQflush(connection) {
        case 0: hasPendingOutput = false
        case 1: hasPendingOutput = true
        default: throw fail(connectionError(connection))
        }
    }

    /// Waits until the socket is readable (or writable, if asked) or `timeout` passes; returns
    /// `poll`'s events, 0 on timeout or a signal, `nil` when the socket is gone or `poll` fails.
    /// At least 1 ms when `timeout` is positive, so that a wait shorter than that does not spin.
    private func waitForSocket(_ connection: OpaquePointer, writable: Bool, timeout: Duration) -> Int16? {
        let socket = PQsocket(connection)
        guard socket >= 0 else { return nil }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN) | (writable ? Int16(POLLOUT) : 0), revents: 0)
        let milliseconds = Int32(clamping: max(0, (timeout + .nanoseconds(999_999)).milliseconds))
        let ready = poll(&descriptor, 1, milliseconds)
        if ready < 0 { return errno == EINTR ? 0 : nil }
        return ready == 0 ? 0 : descriptor.revents
    }

    /// Reads until libpq holds a whole result, the connection fails (true: `PQgetResult` then
    /// reports it), or `deadline` passes (false).
    private func waitUntilNotBusy(_ connection: OpaquePointer, deadline: ContinuousClock.Instant) -> Bool {
        while PQisBusy(connection) != 0 {
            let remaining = deadline - .now
            guard remaining > .zero, let events = waitForSocket(connection, writable: false, timeout: remaining) else {
                return false
            }
            if events != 0, PQconsumeInput(connection) == 0 { return true }
        }
        return true
    }

    /// After CopyDone: sends it, skips the data still in flight until the server's CopyDone, then
    /// waits for its CommandComplete (the slot is released by then), all before `deadline`.
    private func endCopy(_ connection: OpaquePointer, deadline: ContinuousClock.Instant) {
        while true {
            let flushed = PQflush(connection)
            guard flushed >= 0 else { return }
            var buffer: UnsafeMutablePointer<CChar>? = nil
            let length = PQgetCopyData(connection, &buffer, 1)
            if let buffer { PQfreemem(buffer) }
            if length == -1 { break }
            if length < -1 { return }
            if length > 0 { continue }
            let remaining = deadline - .now
            guard remaining > .zero else { return }
            guard let events = waitForSocket(connection, writable: flushed == 1, timeout: remaining) else {
                return
            }
            if events & Int16(POLLIN | POLLERR | POLLHUP) != 0, PQconsumeInput(connection) == 0 { return }
        }
        if waitUntilNotBusy(connection, deadline: deadline), let result = PQgetResult(connection) {
            PQclear(result)
        }
    }
}

extension PostgresConfiguration {
    /// The conninfo with `replication=database`: "instructs the walsender to connect to the
    /// database specified in the dbname parameter, which will allow the connection to be used for
    /// logical replication from that database" (libpq 34.1.2).
    var replicationConninfo: String {
        Self.conninfo(
            parameters.filter { $0.keyword != "replication" } + [("replication", "database")], redactingPassword: false)
    }
}

extension PostgresError {
    /// The same error as ``Kind/connectionUnavailable``: the connection broke while it happened.
    var asConnectionUnavailable: PostgresError {
        PostgresError(
            kind: .connectionUnavailable, sqlState: sqlState, message: message, detail: detail,
            constraint: constraint, statementName: statementName)
    }
}

