import Foundation
import Glibc
import Logging
import MemcachedClient
import PostgresClient
import ServiceRuntime
import TestSupport
import Testing

@testable import ProfileService

/// The change feed on the real replication protocol (docs/design.md §3). Each test streams a
/// slot of its own (created now, so it carries no other test's backlog) and drops it after.
@Suite(.serialized, .requires(.postgres, .memcached)) struct ChangeFeedTests {
    /// A feed on a fresh slot, with this test's cache state.
    final class Harness {
        let shared = ProfileCacheShared()
        let backends: IntegrationBackends
        let slot = "test_feed_\(UInt32.random(in: 0...UInt32.max))"
        let sql: PostgresConnection
        private var feeds: [ChangeFeed] = []

        init() throws {
            backends = try IntegrationBackends()
            sql = PostgresConnection(
                configuration: try PostgresConfiguration(url: TestEnvironment.databaseURL), statements: [],
                logger: IntegrationBackends.logger)
            try sql.connect()
            _ = try LogicalReplicationSetup.ensureSlot(named: slot, on: sql)
        }

        /// Starts another consumer of this harness's slot.
        @discardableResult
        func startFeed(
            publication: String? = nil, configure: (inout ChangeFeedConfiguration) -> Void = { _ in }
        ) throws -> ChangeFeed {
            var configuration = ChangeFeedConfiguration()
            configuration.slotName = slot
            if let publication { configuration.publicationName = publication }
            configure(&configuration)
            configuration.takeoverInterval = .milliseconds(200)
            configuration.reconnectDelay = .milliseconds(200)
            let feed = ChangeFeed(
                configuration: configuration, postgres: try PostgresConfiguration(url: TestEnvironment.databaseURL),
                memcached: try MemcachedConfiguration(servers: TestEnvironment.memcachedServerList), shared: shared,
                logger: IntegrationBackends.logger)
            feed.start()
            feeds.append(feed)
            return feed
        }

        /// A profile at version 1, cached. The feed may invalidate the first populate's lease
        /// when it applies the INSERT (it cannot tell how old a reader's row is), so read again.
        func cachedProfile() throws -> Profile {
            let profile = try backends.seed()
            let cached = Eventually.wait(interval: .milliseconds(5)) {
                _ = try? backends.repository(shared).read(id: profile.id)
                return backends.cachedVersion(profile.id, shared: shared) == 1
            }
            #expect(cached)
            return profile
        }

        /// An UPDATE as a support tool would run it: straight SQL, no write-through.
        func updateInSQL(_ id: Int64, displayName: String) throws {
            try sql.simpleQuery(
                "UPDATE user_profiles SET display_name = '\(displayName)', version = version + 1, updated_at = now() "
                    + "WHERE id = \(id)")
        }

        func waitUntilActive(_ feed: ChangeFeed) -> Bool {
            Eventually.wait(interval: .milliseconds(5)) { feed.monitor.current.state == .active }
        }

        deinit {
            for feed in feeds { feed.stop() }
            _ = Eventually.wait(timeout: .seconds(5)) { (try? LogicalReplicationSetup.dropSlot(named: slot, on: sql)) != nil }
            sql.close()
        }
    }

    @Test func anUpdateInSQLIsRepairedWithTheRowAsTheAPIServesIt() throws {
        let harness = try Harness()
        let feed = try harness.startFeed()
        #expect(harness.waitUntilActive(feed))
        let profile = try harness.cachedProfile()

        try harness.updateInSQL(profile.id, displayName: "Changed in SQL")
        #expect(Eventually.wait(interval: .milliseconds(5)) { harness.backends.cachedVersion(profile.id, shared: harness.shared) == 2 })
        let row = try #require(try harness.backends.store.profile(id: profile.id))
        let read = try #require(try harness.backends.repository(harness.shared).read(id: profile.id))
        #expect(read.cacheOutcome == .hit)
        #expect(read.json == row.json, "the feed stored the row byte for byte as PostgreSQL formats it")
        #expect(feed.monitor.current.changesApplied >= 1)
    }

    @Test func fiftyProfilesChangedInSQLOneAfterAnotherAreEachServedNewWithinTwoSeconds() throws {
        let harness = try Harness()
        let feed = try harness.startFeed()
        #expect(harness.waitUntilActive(feed))
        let profiles = try (0..<50).map { _ in try harness.cachedProfile() }

        var delays: [Double] = []
        for profile in profiles {
            let committed = Date()
            try harness.updateInSQL(profile.id, displayName: "Support tool")
            let repaired = Eventually.wait(timeout: .seconds(2), interval: .milliseconds(2)) {
                (try? harness.backends.repository(harness.shared).read(id: profile.id))?.version == 2
            }
            #expect(repaired, "profile \(profile.id) still served at version 1 two seconds after its UPDATE")
            delays.append(Date().timeIntervalSince(committed))
        }
        delays.sort()
        print(
            "change feed, UPDATE in SQL → served new: p50 \(Int(delays[delays.count / 2] * 1000)) ms, "
                + "p99 \(Int(delays[delays.count * 99 / 100] * 1000)) ms, max \(Int(delays.last! * 1000)) ms (n=\(delays.count))")
    }

    @Test func changesCommittedWhileNoConsumerRanAreRepairedWhenOneReturns() throws {
        let harness = try Harness()
        let first = try harness.startFeed()
        #expect(harness.waitUntilActive(first))
        let profile = try harness.cachedProfile()
        first.stop()

        try harness.updateInSQL(profile.id, displayName: "While down")
        usleep(300_000)
        #expect(harness.backends.cachedVersion(profile.id, shared: harness.shared) == 1, "nobody consumed the change")

        let second = try harness.startFeed()
        #expect(harness.waitUntilActive(second))
        #expect(Eventually.wait(interval: .milliseconds(5)) { harness.backends.cachedVersion(profile.id, shared: harness.shared) == 2 })
    }

    /// The statements an operator types (issue 21): each reaches the cache under a higher version.
    @Test func operatorStatementsThatLeaveTheVersionReachTheCacheUnderAHigherVersion() throws {
        let harness = try Harness()
        let feed = try harness.startFeed()
        #expect(harness.waitUntilActive(feed))
        let edited = try harness.cachedProfile()
        let reborn = try harness.cachedProfile()
        let many = try (0..<20).map { _ in try harness.cachedProfile() }

        try harness.sql.simpleQuery("UPDATE user_profiles SET display_name = 'psql edit' WHERE id = \(edited.id)")
        try harness.sql.simpleQuery(
            "UPDATE user_profiles SET display_name = 'bulk edit' WHERE id IN (\(many.map { "\($0.id)" }.joined(separator: ",")))")
        try harness.sql.simpleQuery(
            "BEGIN; DELETE FROM user_profiles WHERE id = \(reborn.id); INSERT INTO user_profiles (id, username, display_name) "
                + "VALUES (\(reborn.id), 'u\(reborn.id)', 'reborn'); COMMIT")
        let repository = harness.backends.repository(harness.shared)
        func served(_ id: Int64) -> (version: Int32, json: String)? {
            (try? repository.read(id: id)).map { ($0.version, String(decoding: $0.json.publicView, as: UTF8.self)) }
        }
        #expect(Eventually.wait(timeout: .seconds(2), interval: .milliseconds(10)) {
            served(edited.id)?.version == 2 && served(edited.id)?.json.contains("psql edit") == true
                && served(reborn.id)?.version == 2 && served(reborn.id)?.json.contains("reborn") == true
                && many.allSatisfy { served($0.id)?.json.contains("bulk edit") == true }
        }, "every change is served under a higher version within 2 s")
        _ = try? harness.sql.simpleQuery("DELETE FROM user_profiles WHERE id = \(reborn.id)")
    }

    /// `ALTER TABLE` while the feed runs: pgoutput sends a new `Relation`, and the feed keeps
    /// repairing with the new column list (issue 21), then again after the column is dropped.
    @Test func aColumnAddedAndDroppedWhileTheFeedRunsDoesNotStopIt() throws {
        let harness = try Harness()
        let feed = try harness.startFeed()
        #expect(harness.waitUntilActive(feed))
        let column = "test_extra_\(UInt32.random(in: 0...UInt32.max))"
        try harness.sql.simpleQuery("ALTER TABLE user_profiles ADD COLUMN \(column) text")
        var dropped = false
        defer { if !dropped { _ = try? harness.sql.simpleQuery("ALTER TABLE user_profiles DROP COLUMN IF EXISTS \(column)") } }

        let first = try harness.cachedProfile()
        try harness.sql.simpleQuery("UPDATE user_profiles SET display_name = 'with a column', \(column) = 'x' WHERE id = \(first.id)")
        #expect(Eventually.wait(interval: .milliseconds(5)) { harness.backends.cachedVersion(first.id, shared: harness.shared) == 2 })

        try harness.sql.simpleQuery("ALTER TABLE user_profiles DROP COLUMN \(column)")
        dropped = true
        let second = try harness.cachedProfile()
        try harness.updateInSQL(second.id, displayName: "Without it")
        #expect(Eventually.wait(interval: .milliseconds(5)) { harness.backends.cachedVersion(second.id, shared: harness.shared) == 2 })
        #expect(feed.monitor.current.state == .active)
        #expect(feed.monitor.current.gapsClosed == 0, "a schema change is not a gap")
    }

    @Test func twoConsumersOfOneSlotOneActiveThenTheOtherTakesOver() throws {
        let harness = try Harness()
        let a = try harness.startFeed()
        let b = try harness.startFeed()
        #expect(Eventually.wait(interval: .milliseconds(5)) { [a, b].contains { $0.monitor.current.state == .active } })
        #expect(Eventually.wait(interval: .milliseconds(5)) { Set([a.monitor.current.state, b.monitor.current.state]) == [.active, .standby] })
        let (active, standby) = a.monitor.current.state == .active ? (a, b) : (b, a)

        active.stop()
        let stopped = Date()
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(5)) { standby.monitor.current.state == .active })
        print("change feed takeover after the consumer stopped: \(Int(Date().timeIntervalSince(stopped) * 1000)) ms")
        let profile = try harness.cachedProfile()
        try harness.updateInSQL(profile.id, displayName: "After takeover")
        #expect(Eventually.wait(interval: .milliseconds(5)) { harness.backends.cachedVersion(profile.id, shared: harness.shared) == 2 })
    }

    @Test func aChangeForAHungNodeIsHeldConfirmedNoFurtherAndAppliedWhenItAnswers() throws {
        let harness = try Harness()
        let feed = try harness.startFeed()
        #expect(harness.waitUntilActive(feed))
        let hungNode = TestEnvironment.memcachedServers[1]
        var profile = try harness.cachedProfile()
        while harness.backends.cache.server(forKey: harness.shared.configuration.key(for: profile.id))?.port
            != hungNode.port
        {
            profile = try harness.cachedProfile()
        }
        let pid = try TestEnvironment.memcachedPID(port: hungNode.port)
        try TestEnvironment.freeze(pid)
        defer { kill(pid, SIGCONT) }

        try harness.updateInSQL(profile.id, displayName: "While hung")
        #expect(Eventually.wait(interval: .milliseconds(5)) { feed.monitor.current.pendingRepairs == 1 }, "the change is held, not dropped")
        let slot = try LogicalReplicationSetup.slotStatus(named: harness.slot, on: harness.sql)
        #expect((slot?.lagBytes ?? 0) > 0, "the slot is not confirmed past the held change")

        kill(pid, SIGCONT)
        #expect(Eventually.wait(interval: .milliseconds(5)) { feed.monitor.current.pendingRepairs == 0 })
        // Applied: the row replaced the entry, or (when the node failed the cas right after it
        // woke) the entry was deleted; either way version 1 is never served again.
        #expect(harness.backends.cachedVersion(profile.id, shared: harness.shared) != 1)
        #expect(Eventually.wait(interval: .milliseconds(5)) {
            (try? harness.backends.repository(harness.shared).read(id: profile.id))?.version == 2
        })
    }

    /// A backfill larger than the feed may hold in memory (the bound set to 50 here): applied in
    /// parts as it arrives, never more than the bound held at once, every cached profile repaired,
    /// and the slot confirmed past the transaction only once its last part is applied.
    @Test func aTransactionLargerThanTheMemoryBoundIsAppliedInPartsAndConfirmedAfterItsLast() throws {
        let harness = try Harness()
        let feed = try harness.startFeed { $0.maxChangesInMemory = 50 }
        #expect(harness.waitUntilActive(feed))
        let cached = try (0..<30).map { _ in try harness.cachedProfile() }
        let appliedBefore = feed.monitor.current.changesApplied
        let first = Int64.random(in: 1_000_000_000...8_000_000_000_000_000)
        // One transaction: the 30 cached profiles among 2,000 new rows, as a migration writes them.
        let ids = cached.map { String($0.id) }.joined(separator: ",")
        try harness.sql.simpleQuery(
            """
            BEGIN;
            INSERT INTO user_profiles (id, username, display_name)
                SELECT i, 'bulk' || i, 'Bulk ' || i FROM generate_series(\(first), \(first + 999)) AS i;
            UPDATE user_profiles SET display_name = display_name || ' (backfilled)' WHERE id IN (\(ids));
            INSERT INTO user_profiles (id, username, display_name)
                SELECT i, 'bulk' || i, 'Bulk ' || i FROM generate_series(\(first + 1000), \(first + 1999)) AS i;
            COMMIT;
            """)
        let committedAt = try LogicalReplicationSetup.currentPosition(on: harness.sql)
        for profile in cached {
            #expect(Eventually.wait(timeout: .seconds(10), interval: .milliseconds(5)) {
                (try? harness.backends.repository(harness.shared).read(id: profile.id)).map {
                    String(decoding: $0.json.publicView, as: UTF8.self).contains("(backfilled)")
                } == true
            }, "profile \(profile.id) was not repaired")
        }
        #expect(Eventually.wait(timeout: .seconds(10)) { feed.monitor.current.changesApplied - appliedBefore >= 2030 })
        #expect(feed.monitor.current.mostChangesHeld <= 50, "held \(feed.monitor.current.mostChangesHeld) changes at once")
        #expect(Eventually.wait(timeout: .seconds(10)) {
            (try? LogicalReplicationSetup.slotStatus(named: harness.slot, on: harness.sql))??.confirmedFlushLSN
                .map { $0 >= committedAt } == true
        }, "the slot is confirmed past the transaction once its last part is applied")
        #expect(feed.monitor.current.changesWaiting == 0)
        try harness.sql.simpleQuery("DELETE FROM user_profiles WHERE id BETWEEN \(first) AND \(first + 1999)")
    }
}
