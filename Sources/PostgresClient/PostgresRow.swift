/// One result row, copied out of libpq's result before it was freed.
///
/// Values are PostgreSQL's text format; decode them by column name:
///
/// ```swift
/// let id = try row.decode("id", as: Int64.self)
/// let bio: String? = try row.decodeIfPresent("bio")
/// ```
public struct PostgresRow: Sendable {
    /// The result's column names, in order.
    public let columnNames: [String]
    /// The values in text format; `nil` is SQL `NULL`.
    let values: [String?]

    init(columnNames: [String], values: [String?]) {
        self.columnNames = columnNames
        self.values = values
    }

    /// Decodes a column that must not be `NULL`.
    ///
    /// - Throws: ``PostgresDecodingError`` with code ``PostgresDecodingError/Code/missingData`` for
    ///   `NULL`, ``PostgresDecodingError/Code/missingColumn`` for an unknown column, or the code the
    ///   decoder threw (``PostgresDecodingError/Code/failure`` for any other error).
    public func decode<T: PostgresDecodable>(
        _ column: String, as type: T.Type = T.self, file: String = #fileID, line: Int = #line
    ) throws -> T {
        guard let value = try decodeIfPresent(column, as: type, file: file, line: line) else {
            throw PostgresDecodingError(
                code: .missingData, column: column, index: columnNames.firstIndex(of: column),
                targetType: String(describing: T.self), file: file, line: line)
        }
        return value
    }

    /// Decodes a column, returning `nil` for SQL `NULL`.
    ///
    /// - Throws: ``PostgresDecodingError`` as ``decode(_:as:file:line:)`` does, except for `NULL`.
    public func decodeIfPresent<T: PostgresDecodable>(
        _ column: String, as type: T.Type = T.self, file: String = #fileID, line: Int = #line
    ) throws -> T? {
        guard let index = columnNames.firstIndex(of: column) else {
            throw PostgresDecodingError(
                code: .missingColumn, column: column, index: nil, targetType: String(describing: T.self),
                file: file, line: line)
        }
        guard let text = values[index] else { return nil }
        do {
            return try T(postgresText: text)
        } catch {
            throw PostgresDecodingError(
                code: error as? PostgresDecodingError.Code ?? .failure, column: column, index: index,
                targetType: String(describing: T.self), file: file, line: line)
        }
    }
}

/// The rows and affected-row count of one statement.
public struct PostgresQueryResult: Sendable {
    /// The rows returned, copied out of libpq's result.
    public let rows: [PostgresRow]
    /// `PQcmdTuples`: rows inserted, updated, deleted or selected; 0 when the command reports none.
    public let affectedRows: Int

    init(rows: [PostgresRow], affectedRows: Int) {
        self.rows = rows
        self.affectedRows = affectedRows
    }
}
