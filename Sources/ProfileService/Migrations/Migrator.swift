public import Logging
public import PostgresClient

/// Applies pending migrations: each file in its own transaction, recorded with its checksum
/// in `schema_migrations`, under an advisory lock so replicas that start together take turns.
///
/// Running it again changes nothing. A file that was edited after it was applied stops it:
/// schema history must not be rewritten, add a new file instead.
public struct Migrator {
    public enum MigrationError: Error, CustomStringConvertible, Equatable {
        case editedAfterApplied(name: String, appliedChecksum: String, fileChecksum: String)
        case unknownApplied(name: String)

        public var description: String {
            switch self {
            case .editedAfterApplied(let name, let applied, let file):
                "migration \(name) was edited after it was applied (checksum \(applied), file now \(file)); "
                    + "add a new migration instead"
            case .unknownApplied(let name):
                "migration \(name) is recorded as applied but its file is missing"
            }
        }
    }

    /// Any constant works; all replicas must use the same one.
    static let advisoryLockKey: Int64 = 0x7072_6f66_696c_6573  // "profiles"

    /// The statements to declare on the migrator's connection (prepared when it connects). The
    /// two that name `schema_migrations` are left out: on a fresh database that table does not
    /// exist until ``migrate(_:)`` creates it, so preparing them at connect time would fail (42P01)
    /// and log warnings about nothing wrong. They are prepared on first use instead.
    public static let statements: [PostgresStatement] = [Statements.checksum]

    private enum Statements {
        static let checksum = PostgresStatement(
            name: "migration_checksum", sql: "SELECT md5($1) AS checksum", isIdempotent: true)
        static let record = PostgresStatement(
            name: "migration_record",
            sql: "INSERT INTO schema_migrations (name, checksum) VALUES ($1, $2)",
            isIdempotent: false)
        static let applied = PostgresStatement(
            name: "migration_applied", sql: "SELECT name, checksum FROM schema_migrations ORDER BY name",
            isIdempotent: true)
    }

    private let connection: PostgresConnection
    private let logger: Logger

    /// - Parameter connection: a connection declared with ``statements``.
    public init(connection: PostgresConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    /// Applies what is pending and returns the names applied now (empty when up to date).
    @discardableResult
    public func migrate(_ migrations: [Migration]) throws -> [String] {
        try connection.simpleQuery("SELECT pg_advisory_lock(\(Self.advisoryLockKey))")
        defer { _ = try? connection.simpleQuery("SELECT pg_advisory_unlock(\(Self.advisoryLockKey))") }
        try connection.simpleQuery(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                name       TEXT        PRIMARY KEY,
                checksum   TEXT        NOT NULL,
                applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
            )
            """)
        var applied: [String: String] = [:]
        for row in try connection.execute(Statements.applied, []).rows {
            applied[try row.decode("name")] = try row.decode("checksum")
        }
        let fileNames = Set(migrations.map(\.name))
        if let orphan = applied.keys.sorted().first(where: { !fileNames.contains($0) }) {
            throw MigrationError.unknownApplied(name: orphan)
        }
        var appliedNow: [String] = []
        for migration in migrations.sorted(by: { $0.name < $1.name }) {
            let checksum: String = try connection.execute(Statements.checksum, [migration.sql]).rows[0]
                .decode("checksum")
            if let recorded = applied[migration.name] {
                guard recorded == checksum else {
                    throw MigrationError.editedAfterApplied(
                        name: migration.name, appliedChecksum: recorded, fileChecksum: checksum)
                }
                continue
            }
            try connection.withTransaction { connection in
                try connection.simpleQuery(migration.sql)
                _ = try connection.execute(Statements.record, [migration.name, checksum])
            }
            logger.info("applied migration", metadata: ["migration": "\(migration.name)"])
            appliedNow.append(migration.name)
        }
        return appliedNow
    }
}
