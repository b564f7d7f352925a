import Foundation
import Logging
import MemcachedClient
import PostgresClient
import ServiceRuntime
import TestSupport
import Testing

@testable import ProfileService

/// The slot's health (issue 21; docs/design.md §3.3, §3.7) on a PostgreSQL of the test's own,
/// started by scripts/deps.sh with `max_slot_wal_keep_size = 1MB` so that the slot can be
/// invalidated in a second. The shared memcached nodes are used (and flushed).
@Suite(.serialized, .requires(.postgres, .memcached)) struct ChangeFeedSlotTests {
    static let logger = Logger(label: "test")

    @Test func anInvalidatedSlotIsRebuiltAndEveryEntryFromBeforeItIsGone() throws {
        let port = TestEnvironment.freeLoopbackPort()
        let state = "/tmp/profile-service-slot-test-\(port)"
        let environment = ["PROFILE_STATE_DIR": state, "PROFILE_PG_PORT": "\(port)", "PROFILE_PG_SLOT_WAL_KEEP": "1MB"]
        try #require(try TestEnvironment.deps("start-postgres", environment: environment) == 0)
        defer {
            _ = try? TestEnvironment.deps("stop-postgres", environment: environment)
            try? FileManager.default.removeItem(atPath: state)
        }
        let postgres = try PostgresConfiguration(url: "postgres://postgres@127.0.0.1:\(port)/profiles")
        let sql = PostgresConnection(configuration: postgres, statements: PostgresProfileStore.statements(for: .standard), logger: Self.logger)
        defer { sql.close() }
        try sql.connect()
        _ = try Migrator(connection: sql, logger: Self.logger).migrate(
            try Migration.load(from: TestEnvironment.repositoryRoot.appendingPathComponent("migrations").path))
        let slot = "test_lost_\(UInt32.random(in: 0...UInt32.max))"
        _ = try LogicalReplicationSetup.ensureSlot(named: slot, on: sql)

        let memcached = try MemcachedConfiguration(servers: TestEnvironment.memcachedServerList)
        let cache = try MemcachedConnection(configuration: memcached, logger: Self.logger)
        defer { cache.close() }
        let shared = ProfileCacheShared()
        let store = PostgresProfileStore(connection: sql, logger: Self.logger)
        let repository = ProfileRepository(store: store, cache: cache, shared: shared, logger: Self.logger)
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        _ = try store.create(id: id, username: "u\(id)", displayName: "Before")
        func cachedVersion() -> Int32? {
            guard case .hit(let item) = cache.get(shared.configuration.key(for: id)),
                case .profile(let version, _)? = CacheEntry(decoding: item.value, shape: ProfileFieldCatalog.standard.shape)
            else { return nil }
            return version
        }
        _ = try repository.read(id: id)
        #expect(cachedVersion() == 1)

        // Nobody consumes the slot while the profile changes and the WAL passes 1 MB: the server
        // removes WAL the slot needs, and that change can never be streamed.
        try sql.simpleQuery("UPDATE user_profiles SET display_name = 'Lost change' WHERE id = \(id)")
        try sql.simpleQuery("CREATE TABLE filler (x int)")
        for index in 0..<4 { try sql.simpleQuery("INSERT INTO filler VALUES (\(index)); SELECT pg_switch_wal()") }
        try sql.simpleQuery("CHECKPOINT")
        try #require(try LogicalReplicationSetup.slotStatus(named: slot, on: sql)?.isLost == true, "the slot was invalidated")

        var configuration = ChangeFeedConfiguration()
        configuration.slotName = slot
        configuration.reconnectDelay = .milliseconds(200)
        configuration.slotCheckInterval = .milliseconds(100)
        let feed = ChangeFeed(configuration: configuration, postgres: postgres, memcached: memcached, shared: shared, logger: Self.logger)
        feed.start()
        defer { feed.stop() }
        #expect(Eventually.wait(timeout: .seconds(10), interval: .milliseconds(10)) { feed.monitor.current.gapsClosed == 1 })
        #expect(Eventually.wait(timeout: .seconds(10), interval: .milliseconds(10)) { feed.monitor.current.state == .active })
        #expect(cachedVersion() != 1, "the entry from before the gap is gone (flushed)")
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(10)) {
            feed.monitor.current.slotWALStatus == "reserved"
        }, "the new slot's health is reported")
        #expect(try LogicalReplicationSetup.slotStatus(named: slot, on: sql)?.isLost == false)

        // The feed goes on from the new slot.
        _ = try repository.read(id: id)
        try sql.simpleQuery("UPDATE user_profiles SET display_name = 'After the rebuild' WHERE id = \(id)")
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(10)) { cachedVersion() == 3 })
        feed.stop()
        _ = try? LogicalReplicationSetup.dropSlot(named: slot, on: sql)
    }
}
