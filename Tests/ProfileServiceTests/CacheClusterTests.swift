import PostgresClient
import Testing

@testable import ProfileService

/// Cache cluster names, their slots and channels, and what the change feed's monitor makes of
/// every cluster's slot (docs/design.md §3.10). No server.
@Suite struct CacheClusterTests {
    @Test func theDefaultClusterKeepsTheSlotAndChannelOfASingleClusterFleet() {
        #expect(CacheCluster.default.slotName == "profile_service_cache")
        #expect(CacheCluster.default.notificationChannel == "profile_changes")
        #expect(ChangeFeedConfiguration().slotName == "profile_service_cache")
        #expect((try? CacheCluster("default")) == .default)
    }

    @Test func aNamedClusterHasASlotAndAChannelOfItsOwn() throws {
        let cluster = try CacheCluster("eu_west2")
        #expect(cluster.slotName == "profile_service_cache_eu_west2")
        #expect(cluster.notificationChannel == "profile_changes_eu_west2")
        let configuration = ChangeFeedConfiguration(cluster: cluster)
        #expect(configuration.slotName == cluster.slotName)
        #expect(configuration.notificationChannel == cluster.notificationChannel)
        #expect(configuration.consumerName.hasPrefix("profile-service/eu_west2/"))
        #expect(configuration.consumerName.utf8.count <= 63)
    }

    @Test(arguments: ["", "EU", "1st", "eu-west", "eu west", "é", "_x", String(repeating: "a", count: 33), "a;drop"])
    func namesThatCannotNameASlotAreRefused(_ name: String) {
        #expect(throws: CacheCluster.InvalidName.self) { try CacheCluster(name) }
    }

    @Test func theLongestNameStillMakesASlotNamePostgreSQLKeeps() throws {
        let cluster = try CacheCluster(String(repeating: "z", count: CacheCluster.maximumNameLength))
        #expect(cluster.slotName.utf8.count <= 63)
    }

    @Test func slotNamesMapBackToTheirClusterAndOtherSlotsAreNotClusters() throws {
        #expect(CacheCluster(slotName: "profile_service_cache") == .default)
        #expect(CacheCluster(slotName: "profile_service_cache_b") == (try CacheCluster("b")))
        #expect(CacheCluster(slotName: "profile_service_cache_default") == nil)
        #expect(CacheCluster(slotName: "profile_service_cacheb") == nil)
        #expect(CacheCluster(slotName: "profile_service_cache_B") == nil)
        #expect(CacheCluster(slotName: "test_feed_1") == nil)
    }

    static func slot(_ name: String, active: Bool, consumer: String? = nil) -> LogicalReplicationSetup.NamedSlot {
        LogicalReplicationSetup.NamedSlot(
            name: name,
            status: .init(confirmedFlushLSN: LSN(rawValue: 100), isActive: active, lagBytes: 40, walStatus: "reserved", retainedBytes: 900),
            consumer: consumer)
    }

    @Test func theMonitorCountsHowLongAClusterHasGoneUnconsumedAndForgetsADroppedOne() throws {
        let monitor = ChangeFeedMonitor(enabled: true, cluster: .default)
        let start = ContinuousClock.now
        monitor.recordClusters(
            [
                Self.slot("profile_service_cache", active: true, consumer: "profile-service/default/a/1"),
                Self.slot("profile_service_cache_far", active: false), Self.slot("test_feed_9", active: false),
            ], now: start)
        var clusters = monitor.current.clusters
        #expect(clusters.map(\.cluster.name) == ["default", "far"], "other slots are not clusters")
        #expect(clusters[0].isConsumed && clusters[0].consumer == "profile-service/default/a/1")
        #expect(clusters[1].unconsumedSeconds == 0, "first seen unconsumed now")

        monitor.recordClusters(
            [Self.slot("profile_service_cache", active: false), Self.slot("profile_service_cache_far", active: false)],
            now: start + .seconds(90))
        clusters = monitor.current.clusters
        #expect(clusters[1].unconsumedSeconds == 90)
        #expect(clusters[0].unconsumedSeconds == 0, "default's consumer left only now")

        monitor.recordClusters(
            [Self.slot("profile_service_cache", active: true), Self.slot("profile_service_cache_far", active: true)],
            now: start + .seconds(100))
        monitor.recordClusters([Self.slot("profile_service_cache", active: true)], now: start + .seconds(200))
        clusters = monitor.current.clusters
        #expect(clusters.map(\.cluster.name) == ["default"], "a dropped slot leaves the report")
        #expect(clusters[0].unconsumedSeconds == 0)
    }
}
