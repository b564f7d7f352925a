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
                case .profile(let version, _, _)? = CacheEntry(decoding: item.value, shape: ProfileFieldCatalog.standard.shape)
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

    /// Slot names are the server's, slots belong to a database (docs/design.md §3.10): a cluster's
    /// slot is found, created and dropped in its own database only, and one named the way slots
    /// were before names carried their database is kept where it is its database's.
    @Test func aClustersSlotIsItsDatabasesAndOneOfTheOlderNameIsKeptOnlyThere() throws {
        let here = PostgresConnection(
            configuration: try PostgresConfiguration(url: TestEnvironment.databaseURL), statements: [], logger: Self.logger)
        defer { here.close() }
        try here.connect()
        let otherName = "slots_other_\(UInt32.random(in: 0...UInt32.max))"
        try here.simpleQuery("CREATE DATABASE \(otherName)")
        var otherURL = URLComponents(string: TestEnvironment.databaseURL)!
        otherURL.path = "/" + otherName
        let other = PostgresConnection(
            configuration: try PostgresConfiguration(url: otherURL.string!), statements: [], logger: Self.logger)
        let cluster = try CacheCluster("slots_\(UInt32.random(in: 0...UInt32.max))")
        let upgraded = try CacheCluster("upgraded_\(UInt32.random(in: 0...UInt32.max))")
        defer {
            _ = try? LogicalReplicationSetup.dropSlot(named: cluster.legacySlotName, on: other)
            if let oid = try? LogicalReplicationSetup.databaseOID(on: here) {
                _ = try? LogicalReplicationSetup.dropSlot(named: cluster.slotName(inDatabase: oid), on: here)
            }
            _ = try? LogicalReplicationSetup.dropSlot(named: upgraded.legacySlotName, on: here)
            other.close()
            _ = try? here.simpleQuery("DROP DATABASE IF EXISTS \(otherName) WITH (FORCE)")
        }
        try other.connect()
        let hereOID = try LogicalReplicationSetup.databaseOID(on: here)
        #expect(try LogicalReplicationSetup.databaseOID(on: other) != hereOID)

        // The other database runs the cluster with a slot of the older name.
        #expect(try LogicalReplicationSetup.ensureSlot(named: cluster.legacySlotName, on: other))
        #expect(try CacheClusterSlots.slotName(for: cluster, on: other) == cluster.legacySlotName, "kept where it is")

        // Here, that slot is not this database's: not found, not adopted, not dropped, not created over.
        #expect(try LogicalReplicationSetup.slotStatus(named: cluster.legacySlotName, on: here) == nil)
        #expect(try CacheClusterSlots.slotName(for: cluster, on: here) == cluster.slotName(inDatabase: hereOID))
        #expect(try !LogicalReplicationSetup.dropSlot(named: cluster.legacySlotName, on: here))
        let refused = #expect(throws: PostgresError.self) {
            _ = try LogicalReplicationSetup.ensureSlot(named: cluster.legacySlotName, on: here)
        }
        #expect(refused?.sqlState == .duplicateObject)
        #expect(refused?.message.contains(otherName) == true, "\(refused?.message ?? "")")
        #expect(try !CacheClusterSlots.list(on: here).contains { $0.cluster == cluster })
        #expect(try LogicalReplicationSetup.slotStatus(named: cluster.legacySlotName, on: other) != nil, "still there")

        // Here the cluster gets a slot of this database's name, and each database lists its own.
        #expect(try LogicalReplicationSetup.ensureSlot(named: cluster.slotName(inDatabase: hereOID), on: here))
        #expect(try CacheClusterSlots.list(on: here).filter { $0.cluster == cluster }.map(\.slot.name) == [cluster.slotName(inDatabase: hereOID)])
        #expect(try CacheClusterSlots.list(on: other).map(\.slot.name) == [cluster.legacySlotName])

        // An instance upgraded beside older ones of its database streams their slot.
        #expect(try LogicalReplicationSetup.ensureSlot(named: upgraded.legacySlotName, on: here))
        #expect(try CacheClusterSlots.slotName(for: upgraded, on: here) == upgraded.legacySlotName)
    }
}
