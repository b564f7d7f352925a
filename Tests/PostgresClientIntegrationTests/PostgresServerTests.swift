import Foundation
import Logging
import PostgresClient
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Every test that talks to the real PostgreSQL, one at a time: one of them restarts the server.
/// Nested suites inherit `.serialized`.
@Suite(.serialized, .requires(.postgres)) enum PostgresServerTests {
    static func configuration(
        url: String = TestEnvironment.databaseURL, statementTimeout: Duration = .seconds(5),
        lockTimeout: Duration = .seconds(2)
    ) throws -> PostgresConfiguration {
        try PostgresConfiguration(
            url: url, applicationName: "postgres-client-tests", statementTimeout: statementTimeout,
            lockTimeout: lockTimeout)
    }

    static func connection(
        statements: [PostgresStatement] = [], statementTimeout: Duration = .seconds(5),
        lockTimeout: Duration = .seconds(2)
    ) throws -> PostgresConnection {
        try TestEnvironment.requirePostgres()
        return PostgresConnection(
            configuration: try configuration(statementTimeout: statementTimeout, lockTimeout: lockTimeout),
            statements: statements, logger: logger)
    }

    /// A connection with `table`'s statements and a new `Table(test)` holding one row (1, alice);
    /// the caller closes the one and drops the other.
    static func tableWithAlice(_ test: String) throws -> (Table, PostgresConnection) {
        let table = Table(test)
        let connection = try connection(statements: table.statements)
        try table.create(on: connection)
        _ = try connection.execute(table.insert, [1, "alice", nil, 1, true])
        return (table, connection)
    }

    /// The server process of the connection's session.
    static func backendPID(_ connection: PostgresConnection) throws -> Int {
        try #require(try connection.simpleQuery("SELECT pg_backend_pid() AS pid").rows.first)
            .decode("pid", as: Int.self)
    }

    /// Errors only: tests create their tables after connecting, so eager prepares log warnings.
    static var logger: Logger {
        var logger = Logger(label: "PostgresClientTests")
        logger.logLevel = .error
        return logger
    }

    /// A table of its own for each test, named `pgclient_<test>_<random>`.
    struct Table {
        let name: String
        let insert: PostgresStatement
        let select: PostgresStatement
        let updateBio: PostgresStatement
        var statements: [PostgresStatement] { [insert, select, updateBio] }

        init(_ test: String) {
            name = "pgclient_\(test)_\(UInt32.random(in: 0...UInt32.max))"
            insert = PostgresStatement(
                name: "insert_person",
                sql: "INSERT INTO \(name) (id, username, bio, age, active) VALUES ($1, $2, $3, $4, $5)",
                isIdempotent: false)
            select = PostgresStatement(
                name: "select_person", sql: "SELECT id, username, bio, age, active FROM \(name) WHERE id = $1",
                isIdempotent: true)
            updateBio = PostgresStatement(
                name: "update_bio", sql: "UPDATE \(name) SET bio = $2 WHERE id = $1", isIdempotent: false)
        }

        func create(on connection: PostgresConnection) throws {
            try connection.simpleQuery(
                """
                CREATE TABLE \(name) (
                    id BIGINT PRIMARY KEY, username TEXT NOT NULL UNIQUE, bio TEXT,
                    age INTEGER CHECK (age >= 0), active BOOLEAN NOT NULL DEFAULT true)
                """)
        }

        func drop() {
            guard let connection = try? PostgresServerTests.connection() else { return }
            _ = try? connection.simpleQuery("DROP TABLE IF EXISTS \(name)")
            connection.close()
        }
    }

    static func sleep(_ duration: Duration) {
        usleep(UInt32(duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000))
    }

    static func elapsed<T>(_ body: () throws -> T) rethrows -> (T, Duration) {
        let start = ContinuousClock.now
        let value = try body()
        return (value, ContinuousClock.now - start)
    }
}

struct TestFailure: Error {}

extension PostgresServerTests {
    /// Runs `scripts/deps.sh <command>` with this process's environment and waits for it.
    ///
    /// Not `TestEnvironment.deps`: Foundation's `Process` on Linux hands the child a socket that
    /// `pg_ctl`'s daemonised postmaster inherits, and `waitUntilExit()` then never returns after
    /// `start-postgres` (seen here: deps.sh left defunct, the test hung). This closes every
    /// descriptor above stderr in a shell before running the script, and reaps it with `waitpid`.
    static func deps(_ command: String) throws -> Int32 {
        try TestEnvironment.deps(command)
    }

    struct DepsFailure: Error {
        let command: String
        let status: Int32
    }
}
