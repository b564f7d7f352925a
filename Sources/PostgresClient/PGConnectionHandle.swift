internal import CLibPQ

/// Owns one libpq `PGconn` and finishes it with `PQfinish` exactly once.
///
/// The owners of a session (``PostgresConnection``, ``LogicalReplicationStream``) hold one of
/// these while connected, as GRDB's `Database` holds its `sqliteConnection`, and the C handle
/// rule of this package is the same for every owner type (this one, ``PostgresResultHandle`` and
/// the memcached handle):
///
/// - Operations and ``close()`` run on the owner's thread: the owner checks it (``OwnerThread``)
///   before it touches the handle. libpq: "no two threads attempt to manipulate the same PGconn
///   object at the same time" (libpq 34.19).
/// - Whatever talks to the server on the way out (a replication stream's CopyDone) belongs to the
///   owner's explicit close, on that thread, before ``close()`` here.
/// - `deinit` only frees, never waiting for a server: a handle still open there is a leak, which
///   fails an assertion in debug builds and is finished quietly in release builds.
///
/// Related libpq documentation: <https://www.postgresql.org/docs/15/libpq-connect.html>
final class PGConnectionHandle {
    /// The connection; only this class frees it. `nil` once closed.
    private var connection: OpaquePointer?

    private init(_ connection: OpaquePointer) {
        self.connection = connection
    }

    deinit {
        if let connection {
            assertionFailure("leak of an open PGConnectionHandle: its owner must call close() on its owner thread")
            PQfinish(connection)
        }
    }

    /// Connects with `PQconnectdb` (blocking, bounded by the conninfo's `connect_timeout`) and
    /// silences notices, which libpq would print to stderr ("there is no transaction in progress").
    ///
    /// libpq: "Note that when PQconnectdb … returns a non-null pointer, you must call PQfinish when
    /// you are finished with it, in order to dispose of the structure and any associated memory
    /// blocks. This must be done even if the connection attempt fails or is abandoned." So a
    /// failed attempt is finished here, before the error is thrown.
    ///
    /// - Throws: ``PostgresError`` of kind ``PostgresError/Kind/connectionUnavailable`` with
    ///   libpq's message.
    static func connect(conninfo: String) throws(PostgresError) -> PGConnectionHandle {
        guard let connection = PQconnectdb(conninfo) else {
            throw PostgresError(kind: .connectionUnavailable, message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = errorMessage(of: connection)
            PQfinish(connection)
            throw PostgresError(kind: .connectionUnavailable, message: message)
        }
        _ = PQsetNoticeProcessor(connection, { _, _ in }, nil)
        return PGConnectionHandle(connection)
    }

    /// The `PGconn`, lent for libpq calls on the owner thread; never kept past ``close()``.
    var pointer: OpaquePointer {
        guard let connection else { preconditionFailure("PGConnectionHandle used after close()") }
        return connection
    }

    /// Finishes the connection (`PQfinish`: closes the socket and frees the `PGconn`). Calling
    /// it twice is harmless.
    func close() {
        guard let connection else { return }
        self.connection = nil
        PQfinish(connection)
    }
}

// Holds a C pointer that must be freed exactly once, by the thread that owns it.
@available(*, unavailable)
extension PGConnectionHandle: Sendable {}
