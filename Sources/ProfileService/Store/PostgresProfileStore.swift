public import Logging
import Metrics
public import PostgresClient

/// ``ProfileStore`` over PostgreSQL: optimistic updates in one statement.
///
/// Its statements run on a connection of its own (a thread that talks to PostgreSQL all the
/// time: the change feed, a standby's reader) or on one borrowed from a pool for each statement
/// (the request workers, which mostly wait on memcached: docs/design.md §9).
public final class PostgresProfileStore: ProfileStore {
    private let source: Source
    private let logger: Logger

    private enum Source {
        case connection(PostgresConnection)
        case pool(PostgresConnectionPool)
    }

    /// The statements this store uses; declare them on the connection that you pass in.
    public static let statements: [PostgresStatement] = [
        Statements.select, Statements.selectMany, Statements.update, Statements.updateMany, Statements.insert,
        Statements.delete, Statements.patch, Statements.deletedVersion, Statements.walPosition,
    ]

    /// The statements a read-only session (a standby's) needs.
    public static let readStatements: [PostgresStatement] = [Statements.select, Statements.selectMany]

    /// A store whose statements run on `connection`, which the caller's thread owns.
    public init(connection: PostgresConnection, logger: Logger) {
        self.source = .connection(connection)
        self.logger = logger
    }

    /// A store whose statements each borrow a connection of `pool`.
    public init(pool: PostgresConnectionPool, logger: Logger) {
        self.source = .pool(pool)
        self.logger = logger
    }

    private enum Statements {
        static let columns = """
            id, username, display_name, version,
            to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS updated_at
            """
        static let select = PostgresStatement(
            name: "profile_select",
            sql: "SELECT \(columns) FROM user_profiles WHERE id = $1",
            isIdempotent: true)
        /// Several rows at once; `$1` is a bigint array in text form (`{1,2,3}`).
        static let selectMany = PostgresStatement(
            name: "profile_select_many",
            sql: "SELECT \(columns) FROM user_profiles WHERE id = ANY($1::bigint[])",
            isIdempotent: true)
        /// A patch without a precondition: whatever the stored version.
        static let patch = PostgresStatement(
            name: "profile_patch",
            sql: """
                UPDATE user_profiles SET display_name = $2, version = version + 1, updated_at = now()
                WHERE id = $1 RETURNING \(columns)
                """,
            isIdempotent: false)
        /// The deletion: only at the expected version when `$2` is not null.
        static let delete = PostgresStatement(
            name: "profile_delete",
            sql: "DELETE FROM user_profiles WHERE id = $1 AND ($2::integer IS NULL OR version = $2) RETURNING version",
            isIdempotent: false)
        /// A deleted row's last version, which the tombstone keeps (migrations/0003_version_rules.sql).
        static let deletedVersion = PostgresStatement(
            name: "profile_deleted_version",
            sql: "SELECT version FROM user_profile_tombstones WHERE id = $1",
            isIdempotent: true)
        /// The flushed position, not the insert position: records that no commit has flushed yet
        /// (pruning by reads, say) sit in a partial WAL page until the next commit, and a standby
        /// cannot replay what it has not been sent (docs/design.md §8).
        static let walPosition = PostgresStatement(
            name: "wal_flush_position", sql: "SELECT pg_current_wal_flush_lsn()::text AS position", isIdempotent: true)
        /// The optimistic update: it changes the row only if nobody changed it since `version`.
        static let update = PostgresStatement(
            name: "profile_update",
            sql: """
                UPDATE user_profiles SET display_name = $3, version = version + 1, updated_at = now()
                WHERE id = $1 AND version = $2 RETURNING \(columns)
                """,
            isIdempotent: false)
        /// Several optimistic updates in one statement, so one transaction; `$1`, `$2` and `$3` are
        /// arrays in text form of the ids, expected versions and names. A row another transaction
        /// holds locked (an operator's open `UPDATE`, another statement of this kind) is skipped,
        /// not waited for: it is left out of the answer and its write goes alone, so one locked
        /// row never holds a whole group, and two such statements never wait on each other.
        static let updateMany = PostgresStatement(
            name: "profile_update_many",
            sql: """
                WITH w AS (SELECT * FROM unnest($1::bigint[], $2::integer[], $3::text[]) AS w(id, version, display_name)),
                locked AS (
                    SELECT p.id FROM user_profiles AS p JOIN w ON p.id = w.id
                    ORDER BY p.id FOR UPDATE OF p SKIP LOCKED)
                UPDATE user_profiles AS p SET display_name = w.display_name, version = p.version + 1, updated_at = now()
                FROM w WHERE p.id = w.id AND p.version = w.version AND p.id IN (SELECT id FROM locked)
                RETURNING p.id, p.username, p.display_name, p.version,
                    to_char(p.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS updated_at
                """,
            isIdempotent: false)
        static let insert = PostgresStatement(
            name: "profile_insert",
            sql: """
                INSERT INTO user_profiles (id, username, display_name, version, created_at, updated_at)
                VALUES ($1, $2, $3, 1, now(), now()) RETURNING \(columns)
                """,
            isIdempotent: false)
    }

    public func profile(id: Int64) throws(ProfileStoreError) -> Profile? {
        try run { try execute(Statements.select, [id]).rows.first.map(Self.decode) }
    }

    public func profiles(ids: [Int64]) throws(ProfileStoreError) -> [Int64: Profile] {
        guard !ids.isEmpty else { return [:] }
        let rows = try run { try execute(Statements.selectMany, [Self.arrayLiteral(ids.map(String.init))]).rows.map(Self.decode) }
        return Dictionary(rows.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    public func deletedVersion(id: Int64) throws(ProfileStoreError) -> Int32? {
        try run { try execute(Statements.deletedVersion, [id]).rows.first.map { try $0.decode("version", as: Int32.self) } }
    }

    public func walPosition() throws(ProfileStoreError) -> LSN {
        let text = try run { try execute(Statements.walPosition, []).rows.first?.decode("position", as: String.self) }
        guard let text, let position = LSN(text) else { throw .unexpected("pg_current_wal_flush_lsn() returned \(text ?? "no row")") }
        return position
    }

    public func updateDisplayName(id: Int64, to displayName: String, expectedVersion: Int32)
        throws(ProfileStoreError) -> ProfileUpdateOutcome
    {
        if let updated = try run({
            try execute(Statements.update, [id, expectedVersion, displayName]).rows.first.map(Self.decode)
        }) {
            return .updated(updated)
        }
        // Nothing matched: tell "gone" from "changed since" with one more read.
        guard let current = try profile(id: id) else { return .notFound }
        return .versionMismatch(current: current)
    }

    public func setDisplayName(id: Int64, to displayName: String) throws(ProfileStoreError) -> ProfileUpdateOutcome {
        let updated = try run { try execute(Statements.patch, [id, displayName]).rows.first.map(Self.decode) }
        return updated.map { .updated($0) } ?? .notFound
    }

    public func delete(id: Int64, expectedVersion: Int32?) throws(ProfileStoreError) -> ProfileDeleteOutcome {
        if let version = try run({ try execute(Statements.delete, [id, expectedVersion]).rows.first?.decode("version", as: Int32.self) }) {
            return .deleted(version: version)
        }
        // Nothing matched: tell "gone" from "changed since" with one more read.
        guard expectedVersion != nil, let current = try profile(id: id) else { return .notFound }
        return .versionMismatch(current: current)
    }

    public func updateDisplayNames(_ writes: [DisplayNameWrite]) throws(ProfileStoreError) -> [Int64: Profile]? {
        guard !writes.isEmpty else { return [:] }
        let ids = Self.arrayLiteral(writes.map { String($0.id) })
        let versions = Self.arrayLiteral(writes.map { String($0.expectedVersion) })
        let names = Self.arrayLiteral(writes.map { Self.arrayElement($0.displayName) })
        do {
            let rows = try execute(Statements.updateMany, [ids, versions, names]).rows.map(Self.decode)
            return Dictionary(rows.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        } catch let error as PostgresError where error.sqlState != nil && !error.isUnavailable {
            // The server refused the statement (a deadlock, a constraint): in its own transaction,
            // so nothing changed. Each write alone meets only its own fate.
            logger.info("several writes refused together; each is made alone", metadata: ["error": "\(error)"])
            return nil
        } catch {
            throw map(error)
        }
    }

    /// An array in PostgreSQL's text form (`{1,2,3}`), for a `$n::type[]` parameter.
    static func arrayLiteral(_ elements: [String]) -> String {
        "{" + elements.joined(separator: ",") + "}"
    }

    /// A text element of an array literal: always quoted (so `NULL` stays a name), with `"` and
    /// `\` escaped.
    static func arrayElement(_ text: String) -> String {
        var element = "\""
        for character in text.unicodeScalars {
            if character == "\"" || character == "\\" { element.unicodeScalars.append("\\") }
            element.unicodeScalars.append(character)
        }
        element += "\""
        return element
    }

    public func create(id: Int64, username: String, displayName: String) throws(ProfileStoreError) -> Profile {
        do {
            guard let row = try execute(Statements.insert, [id, username, displayName]).rows.first else {
                throw ProfileStoreError.unexpected("INSERT … RETURNING returned no row")
            }
            return try Self.decode(row)
        } catch let error as PostgresError where error.kind == .uniqueViolation {
            if error.constraint == "user_profiles_username_key" { throw .usernameTaken }
            throw .idTaken(current: try? profile(id: id))
        } catch {
            throw map(error)
        }
    }

    public func isHealthy() -> Bool {
        switch source {
        case .connection(let connection): connection.checkHealth()
        case .pool(let pool): (try? pool.withConnection { $0.checkHealth() }) ?? false
        }
    }

    private func execute(_ statement: PostgresStatement, _ parameters: [(any PostgresEncodable)?]) throws
        -> PostgresQueryResult
    {
        switch source {
        case .connection(let connection): try connection.execute(statement, parameters)
        case .pool(let pool): try pool.withConnection { try $0.execute(statement, parameters) }
        }
    }

    private static func decode(_ row: PostgresRow) throws -> Profile {
        Profile(
            id: try row.decode("id"),
            username: try row.decode("username"),
            displayName: try row.decode("display_name"),
            version: try row.decode("version"),
            updatedAt: try row.decode("updated_at"))
    }

    private func run<T>(_ body: () throws -> T) throws(ProfileStoreError) -> T {
        do {
            return try body()
        } catch {
            throw map(error)
        }
    }

    private func map(_ error: any Error) -> ProfileStoreError {
        if let error = error as? ProfileStoreError { return error }
        let kind = (error as? PostgresError).map { "\($0.kind)" } ?? "decoding"
        Counter(label: MetricFamily.databaseErrors.name, dimensions: [("kind", kind)]).increment()
        if let error = error as? PostgresError, error.isUnavailable || error.isRetryable {
            logger.warning("database unavailable", metadata: ["error": "\(error)"])
            return .unavailable
        }
        logger.error("database error", metadata: ["error": "\(error)"])
        return .unexpected("\(error)")
    }
}

@available(*, unavailable, message: "may own a PostgresConnection, which belongs to one thread")
extension PostgresProfileStore: Sendable {}
