import Foundation
import Logging
import PostgresClient
import Testing
import TestSupport

/// The test PostgreSQL as the end-to-end tests use it directly, beside the service.
enum TestDatabase {
    private static let logger = Logger(label: "test-database")

    /// A connection to deps.sh's primary.
    static func primary() throws -> PostgresConnection {
        let connection = PostgresConnection(
            configuration: try PostgresConfiguration(url: TestEnvironment.databaseURL), statements: [], logger: logger)
        try connection.connect()
        return connection
    }

    /// `count` new profiles at version 1, on ids of their own: a random block of 10,000 among
    /// `blocks` (tests that run beside each other use blocks of their own), usernames
    /// `<usernamePrefix><id>`, display names `<namePrefix> <id>`.
    static func insertProfiles(
        _ count: Int, blocks: ClosedRange<Int64>, usernamePrefix: String, namePrefix: String,
        on connection: PostgresConnection
    ) throws -> [Int64] {
        let base = Int64.random(in: blocks) * 10_000
        let ids = Array(base..<(base + Int64(count)))
        try connection.simpleQuery(
            "INSERT INTO user_profiles (id, username, display_name) SELECT g, '\(usernamePrefix)' || g, '\(namePrefix) ' || g "
                + "FROM generate_series(\(ids.first!), \(ids.last!)) AS g")
        return ids
    }

    /// A database of a test's own on deps.sh's server (`CREATE DATABASE`), migrated with the
    /// project's migrations and, if asked, one more. Its service instances stream a slot of its
    /// own, whatever their cache cluster's name.
    struct Own {
        let name: String

        init(prefix: String) throws {
            name = "\(prefix)_\(UInt32.random(in: 0...UInt32.max))"
            let created = try Self.psql(TestEnvironment.databaseURL, "CREATE DATABASE \(name)")
            guard created.status == 0 else { throw TestEnvironment.MissingServer(description: created.standardError) }
        }

        var url: String {
            var components = URLComponents(string: TestEnvironment.databaseURL)!
            components.path = "/" + name
            return components.string!
        }

        static func psql(_ databaseURL: String, _ sql: String) throws -> TestProcess.Finished {
            try TestProcess.run(URL(fileURLWithPath: "/usr/bin/psql"), [databaseURL, "-v", "ON_ERROR_STOP=1", "-qtAc", sql])
        }

        /// Applies the project's migrations and then `sql`, if any, as the next one.
        func migrate(adding sql: String? = nil) throws {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(name)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let migrations = TestEnvironment.repositoryRoot.appendingPathComponent("migrations").path
            for file in try FileManager.default.contentsOfDirectory(atPath: migrations) {
                try FileManager.default.copyItem(atPath: migrations + "/" + file, toPath: folder.appendingPathComponent(file).path)
            }
            if let sql { try sql.write(to: folder.appendingPathComponent("9001_pronouns.sql"), atomically: true, encoding: .utf8) }
            let result = try ServiceProcess.run(["migrate", "--database-url", url, "--migrations-directory", folder.path])
            #expect(result.status == 0, "\(result.standardError)")
        }

        /// The slots a service made in this database (a slot outlives its consumer, and
        /// PostgreSQL refuses to drop a database that has one).
        func dropSlots() {
            _ = try? Self.psql(
                TestEnvironment.databaseURL,
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '\(name)' AND NOT active")
        }

        func drop() {
            dropSlots()
            _ = try? Self.psql(TestEnvironment.databaseURL, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        }
    }
}
