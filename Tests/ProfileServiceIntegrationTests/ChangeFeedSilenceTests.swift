import Foundation
import Glibc
import MemcachedClient
import PostgresClient
import Testing
import TestSupport

@testable import ProfileService

/// Silence is never an answer (issue 25; docs/design.md §2.4, §3.3, §3.7): the feed confirms only
/// what it saw land in memcached and in NOTIFY, and a change the stream will never send is a gap it
/// closes by itself. Real PostgreSQL and memcached; nodes frozen with SIGSTOP.
@Suite(.serialized, .requires(.postgres, .memcached)) struct ChangeFeedSilenceTests {
    typealias Harness = ChangeFeedTests.Harness

    @Test func aTransactionWhileEveryNodeIsSilentIsHeldAndRepairedAfterTheThaw() throws {
        let harness = try Harness()
        let feed = try harness.startFeed()
        #expect(harness.waitUntilActive(feed))
        let profiles = try (0..<20).map { _ in try harness.cachedProfile() }
        let nodes = Set(profiles.compactMap { harness.backends.cache.server(forKey: harness.shared.configuration.key(for: $0.id)) })
        #expect(nodes.count == TestEnvironment.memcachedServers.count, "cached on every node")

        let pids = try TestEnvironment.memcachedServers.map { try TestEnvironment.memcachedPID(port: $0.port) }
        var frozen: [pid_t] = []
        defer { for pid in frozen { kill(pid, SIGCONT) } }
        for pid in pids {
            try TestEnvironment.freeze(pid)
            frozen.append(pid)
        }
        let ids = profiles.map { "\($0.id)" }.joined(separator: ",")
        try harness.sql.simpleQuery(
            "UPDATE user_profiles SET display_name = 'While silent', version = version + 1, updated_at = now() "
                + "WHERE id IN (\(ids))")
        // Before the fix the multi-get's silence read as "no entry": 0 held, the position
        // confirmed, and every entry served at version 1 after the thaw.
        #expect(
            Eventually.wait(interval: .milliseconds(5)) { feed.monitor.current.pendingRepairs == profiles.count },
            "every change is held while no node answers, not taken as absent")
        let slot = try LogicalReplicationSetup.slotStatus(named: harness.slot, on: harness.sql)
        #expect((slot?.lagBytes ?? 0) > 0, "the slot is not confirmed past the held changes")

        for pid in frozen { kill(pid, SIGCONT) }
        frozen = []
        let thawed = ContinuousClock.now
        #expect(Eventually.wait(interval: .milliseconds(5)) { feed.monitor.current.pendingRepairs == 0 })
        let stale = profiles.filter { harness.backends.cachedVersion($0.id, shared: harness.shared) == 1 }
        print("silent nodes: \(profiles.count) changes held, applied \(thawed.duration(to: .now)) after the thaw; \(stale.count) stale")
        #expect(stale.isEmpty, "no profile is served at its old version after the thaw")
    }

    @Test func anAnnouncementWhoseSessionWasClosedIsSentAgain() throws {
        let harness = try Harness()
        let listener = PostgresConnection(
            configuration: try PostgresConfiguration(url: TestEnvironment.databaseURL), statements: [],
            logger: IntegrationBackends.logger)
        defer { listener.close() }
        try listener.listen(on: CacheCluster.default.notificationChannel)
        let feed = try harness.startFeed()
        #expect(harness.waitUntilActive(feed))
        let profile = try harness.cachedProfile()

        try harness.updateInSQL(profile.id, displayName: "First")
        #expect(try received("\(profile.id):2", on: listener))

        // The feed's ordinary session, as the server, idle_session_timeout or a proxy would end it.
        let terminated = try harness.sql.execute(
            PostgresStatement(
                name: "terminate_notifier",
                sql: """
                    SELECT count(pg_terminate_backend(pid))::bigint AS n FROM pg_stat_activity
                    WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' AND query LIKE 'SELECT pg_notify%'
                    """, isIdempotent: false), [])
        let count: Int64 = try terminated.rows.first?.decode("n") ?? 0
        #expect(count >= 1, "the notifier's session was found and closed")

        let sent = ContinuousClock.now
        try harness.updateInSQL(profile.id, displayName: "Second")
        #expect(try received("\(profile.id):3", on: listener), "the change after the lost session is announced")
        print("announcement after the notifier's session was closed: received \(sent.duration(to: .now)) after COMMIT")
    }

    @Test func aPublicationDroppedAndCreatedAgainIsAGapTheFeedClosesByItself() throws {
        let harness = try Harness()
        let publication = "test_pub_\(UInt32.random(in: 0...UInt32.max))"
        try harness.sql.simpleQuery("CREATE PUBLICATION \(publication) FOR TABLE user_profiles")
        defer { _ = try? harness.sql.simpleQuery("DROP PUBLICATION IF EXISTS \(publication)") }
        let feed = try harness.startFeed(publication: publication)
        #expect(harness.waitUntilActive(feed))
        let inGap = try harness.cachedProfile()
        let afterGap = try harness.cachedProfile()

        try harness.sql.simpleQuery("DROP PUBLICATION \(publication)")
        try harness.updateInSQL(inGap.id, displayName: "In the gap")
        #expect(
            Eventually.wait(timeout: .seconds(5), interval: .milliseconds(10)) { feed.monitor.current.state == .stalled },
            "a missing publication is reported, not retried silently")
        #expect(feed.monitor.current.detail?.contains("CREATE PUBLICATION") == true, "the remedy is named")

        try harness.sql.simpleQuery("CREATE PUBLICATION \(publication) FOR TABLE user_profiles")
        let recreated = ContinuousClock.now
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(10)) { feed.monitor.current.gapsClosed == 1 })
        #expect(harness.waitUntilActive(feed))
        try harness.updateInSQL(afterGap.id, displayName: "After the gap")

        let repository = harness.backends.repository(harness.shared)
        func served(_ id: Int64) -> String {
            (try? repository.read(id: id)).map { String(decoding: $0.json.publicView, as: UTF8.self) } ?? ""
        }
        #expect(
            Eventually.wait(timeout: .seconds(3), interval: .milliseconds(10)) {
                served(inGap.id).contains("In the gap") && served(afterGap.id).contains("After the gap")
            }, "the change in the gap and the one after it are read")
        print("publication gap: closed and both changes read \(recreated.duration(to: .now)) after CREATE PUBLICATION")
    }

    @Test func aReplicationSessionTerminatedByTheServerResumesWithoutLosingAChange() throws {
        let harness = try Harness()
        let feed = try harness.startFeed()
        #expect(harness.waitUntilActive(feed))
        let profile = try harness.cachedProfile()
        let terminate = PostgresStatement(
            name: "terminate_walsender",
            sql: "SELECT count(pg_terminate_backend(active_pid))::bigint AS n FROM pg_replication_slots WHERE slot_name = $1",
            isIdempotent: false)
        let count: Int64 = try harness.sql.execute(terminate, [harness.slot]).rows.first?.decode("n") ?? 0
        #expect(count == 1, "the feed's walsender was found and terminated")
        // Committed while the feed reconnects: the slot replays it from the confirmed position.
        try harness.updateInSQL(profile.id, displayName: "While reconnecting")
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(10)) {
            harness.backends.cachedVersion(profile.id, shared: harness.shared) != 1
        }, "the change committed while the stream was down reaches memcached")
        #expect(feed.monitor.current.gapsClosed == 0, "a lost connection is not a gap: the cache stays warm")
    }

    /// Waits up to 2 s for a notification naming `pair` (`id:version`).
    private func received(_ pair: String, on listener: PostgresConnection) throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            for notification in try listener.waitForNotifications(timeout: .milliseconds(100))
            where notification.payload.split(separator: ",").contains(Substring(pair)) {
                return true
            }
        }
        return false
    }
}
