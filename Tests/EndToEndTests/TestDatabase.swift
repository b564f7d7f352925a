import Logging
import PostgresClient
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
}
