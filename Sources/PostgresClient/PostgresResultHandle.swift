internal import CLibPQ

/// Owns one libpq `PGresult` and frees it with `PQclear` in `deinit`.
///
/// libpq: "Every command result should be freed via PQclear when it is no longer needed", and the
/// strings `PQgetvalue` returns live inside the result ("One should not modify the data it points
/// to, and one must explicitly copy the data into other storage if it is to be used past the
/// lifetime of the PGresult structure itself"). So everything leaves this class as Swift
/// values: ``copyOut()`` and ``error(statementName:)``.
final class PostgresResultHandle {
    /// The result; only this class touches it.
    private let result: OpaquePointer

    /// Takes ownership of `result`, which must not be cleared by anyone else.
    init(_ result: OpaquePointer) {
        self.result = result
    }

    deinit {
        PQclear(result)
    }

    /// Whether the command succeeded (`PGRES_COMMAND_OK`, `PGRES_TUPLES_OK` or `PGRES_EMPTY_QUERY`).
    var isSuccess: Bool {
        let status = PQresultStatus(result)
        return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY
    }

    /// The SQLSTATE of a failed result, if the server (or libpq) set one.
    var sqlState: SQLState? {
        field(CLibPQ_PG_DIAG_SQLSTATE).map(SQLState.init(rawValue:))
    }

    /// The failure as a ``PostgresError``, kind mapped from its SQLSTATE.
    func error(statementName: String?) -> PostgresError {
        let state = sqlState
        let message =
            field(CLibPQ_PG_DIAG_MESSAGE_PRIMARY)
            ?? PQresultErrorMessage(result).map { String(cString: $0).trimmingTrailingNewlines() }
            ?? "unknown error"
        return PostgresError(
            kind: state.map(PostgresError.kind(for:)) ?? .other, sqlState: state,
            message: message.isEmpty ? "unknown error" : message, detail: field(CLibPQ_PG_DIAG_MESSAGE_DETAIL),
            constraint: field(CLibPQ_PG_DIAG_CONSTRAINT_NAME), statementName: statementName)
    }

    /// Copies rows (text format) and `PQcmdTuples` into Swift values.
    func copyOut() -> PostgresQueryResult {
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        var columnNames: [String] = []
        columnNames.reserveCapacity(columnCount)
        for column in 0..<columnCount {
            columnNames.append(PQfname(result, Int32(column)).map { String(cString: $0) } ?? "")
        }
        var rows: [PostgresRow] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            var values: [String?] = []
            values.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                let (r, c) = (Int32(row), Int32(column))
                if PQgetisnull(result, r, c) != 0 {
                    values.append(nil)
                } else {
                    let length = Int(PQgetlength(result, r, c))
                    let bytes = UnsafeRawPointer(PQgetvalue(result, r, c)!).assumingMemoryBound(to: UInt8.self)
                    values.append(String(decoding: UnsafeBufferPointer(start: bytes, count: length), as: UTF8.self))
                }
            }
            rows.append(PostgresRow(columnNames: columnNames, values: values))
        }
        let affected = PQcmdTuples(result).map { Int(String(cString: $0)) ?? 0 } ?? 0
        return PostgresQueryResult(rows: rows, affectedRows: affected)
    }

    private func field(_ code: Int32) -> String? {
        PQresultErrorField(result, code).map { String(cString: $0) }
    }
}

// Holds a C pointer that must be freed exactly once; it never leaves the thread that made it.
@available(*, unavailable)
extension PostgresResultHandle: Sendable {}
