import Logging
import PostgresClient
import TestSupport
import Testing

@testable import ProfileService

/// The change feed's wait for its commits to be visible to other sessions (docs/design.md §3.3),
/// on the real server: a transaction still open is not, the same one committed is.
@Suite(.serialized, .requires(.postgres)) struct CommitVisibilityTests {
    private func connect() throws -> PostgresConnection {
        let connection = PostgresConnection(
            configuration: try PostgresConfiguration(url: TestEnvironment.databaseURL), statements: [],
            logger: Logger(label: "commit-visibility"))
        try connection.connect()
        return connection
    }

    @Test func aTransactionIsVisibleOnlyOnceItHasCommitted() throws {
        let writer = try connect()
        let feed = try connect()
        defer {
            writer.close()
            feed.close()
        }
        try writer.simpleQuery("BEGIN")
        let text: String? = try writer.simpleQuery("SELECT txid_current()::text AS xid").rows.first?.decode("xid")
        let full = try #require(text.flatMap { Int64($0) })
        let xid = UInt32(truncatingIfNeeded: full)
        #expect(!CommitVisibility.wait(for: [xid], on: feed, limit: .milliseconds(30)), "still in progress")
        #expect(!CommitVisibility.wait(for: [1, xid], on: feed, limit: .zero), "one of several still in progress")
        try writer.simpleQuery("COMMIT")
        #expect(CommitVisibility.wait(for: [xid], on: feed, limit: .seconds(1)))
        #expect(CommitVisibility.wait(for: [], on: feed, limit: .zero), "nothing to wait for")
    }
}
