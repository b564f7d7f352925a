/// One message of the `pgoutput` logical decoding plugin, protocol version 1: what a
/// ``ReplicationMessage/walData(start:walEnd:serverTime:payload:)`` carries.
///
/// A transaction arrives as ``begin(finalLSN:commitTime:xid:)``, its changes, then
/// ``commit(commitLSN:endLSN:commitTime:)``; only committed transactions, in commit order. A
/// ``relation(_:)`` describes a table before the first change to it on this stream (and again
/// after its definition changes), so a consumer keeps them by ``PgOutputRelation/id``.
///
/// Times are microseconds since 2000-01-01 00:00:00 UTC (see `Date(postgresEpochMicroseconds:)`).
///
/// Related PostgreSQL documentation:
/// <https://www.postgresql.org/docs/15/protocol-logicalrep-message-formats.html>
public enum PgOutputMessage: Sendable, Equatable {
    /// 'B': a transaction starts; `finalLSN` is its commit record's position.
    case begin(finalLSN: LSN, commitTime: Int64, xid: UInt32)
    /// 'C': the transaction committed. Confirming `endLSN`
    /// (``LogicalReplicationStream/sendStatus(flushed:replyRequested:)``) tells the server never to
    /// send it again.
    case commit(commitLSN: LSN, endLSN: LSN, commitTime: Int64)
    /// 'R': a table's id, name and columns.
    case relation(PgOutputRelation)
    /// 'I': a new row.
    case insert(relationID: UInt32, new: [PgOutputValue])
    /// 'U': a changed row. `old` is the old key ('K', when the key changed) or the whole old row
    /// ('O', with `REPLICA IDENTITY FULL`), else `nil`. An unchanged TOASTed column in `new` is
    /// ``PgOutputValue/unchangedToast``.
    case update(relationID: UInt32, old: [PgOutputValue]?, new: [PgOutputValue])
    /// 'D': a removed row: its key columns (others ``PgOutputValue/null``), or the whole row with
    /// `REPLICA IDENTITY FULL`.
    case delete(relationID: UInt32, old: [PgOutputValue])
    /// 'T': `TRUNCATE` of these tables.
    case truncate(relationIDs: [UInt32])
    /// Origin, type, logical message, or anything this decoder does not need; `kind` is its first byte.
    case other(kind: UInt8)
}

/// A table as a 'R' (relation) message describes it.
public struct PgOutputRelation: Sendable, Equatable {
    /// One column, in table order.
    public struct Column: Sendable, Equatable {
        public var name: String
        /// The column's type, e.g. 20 for `bigint`, 25 for `text` (`pg_type.oid`).
        public var typeOID: UInt32
        /// Whether the column is part of the replica identity (by default the primary key).
        public var isKey: Bool

        public init(name: String, typeOID: UInt32, isKey: Bool) {
            self.name = name
            self.typeOID = typeOID
            self.isKey = isKey
        }
    }

    /// The table's OID, which later changes refer to.
    public var id: UInt32
    /// The schema; pgoutput sends `""` for `pg_catalog`.
    public var namespace: String
    public var name: String
    public var columns: [Column]

    public init(id: UInt32, namespace: String, name: String, columns: [Column]) {
        self.id = id
        self.namespace = namespace
        self.name = name
        self.columns = columns
    }
}

/// One column's value in a row of an insert, update or delete.
public enum PgOutputValue: Sendable, Equatable {
    /// SQL `NULL` (and, in a delete's key-only old row, a column that is not part of the key).
    case null
    /// A TOASTed value the update did not change: the server does not send it again.
    case unchangedToast
    /// The value in PostgreSQL's text format, as `SELECT` would print it.
    case text(String)

    /// The text, or `nil` for ``null`` and ``unchangedToast``.
    public var text: String? {
        if case .text(let text) = self { return text }
        return nil
    }
}
