/// A statement declared once and prepared on every connection that runs it.
///
/// ``PostgresConnection`` prepares each declared statement when it connects (and on demand for
/// statements it was not given), and prepares again when the server answers SQLSTATE 26000
/// (`invalid_sql_statement_name`): prepared statements live only as long as their session and
/// vanish after a reconnect.
///
/// ```swift
/// static let selectProfile = PostgresStatement(
///     name: "select_profile", sql: "SELECT id, username FROM user_profiles WHERE id = $1", isIdempotent: true)
/// ```
///
/// Related libpq documentation: <https://www.postgresql.org/docs/15/libpq-exec.html#LIBPQ-PQPREPARE>
public struct PostgresStatement: Sendable, Hashable {
    /// The server-side name; unique per connection. Appears in errors and logs.
    public let name: String
    /// The SQL, with parameters written `$1`, `$2`, ….
    public let sql: String
    /// Whether running it twice is harmless. Only idempotent statements are retried after a lost
    /// connection, because a write may have committed before the connection broke.
    public let isIdempotent: Bool

    public init(name: String, sql: String, isIdempotent: Bool) {
        self.name = name
        self.sql = sql
        self.isIdempotent = isIdempotent
    }
}
