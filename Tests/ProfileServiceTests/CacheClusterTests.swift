import MemcachedClient
import PostgresClient
import Testing

@testable import ProfileService

/// Cache cluster names, their slots and channels, and what the change feed's monitor makes of
/// every cluster's slot (docs/design.md §3.10). No server.
@Suite struct CacheClusterTests {
    @Test func theDefaultClusterKeepsTheChannelOfASingleClusterFleetAndItsSlotNamesItsDatabase() {
        #expect(CacheCluster.default.slotName(inDatabase: 16384) == "profile_service_16384_default")
        #expect(CacheCluster.default.legacySlotName == "profile_service_cache")
        #expect(CacheCluster.default.notificationChannel == "profile_changes")
        #expect(ChangeFeedConfiguration().slotName == nil, "found in the database the feed streams")
        #expect((try? CacheCluster("default")) == .default)
    }

    @Test func aNamedClusterHasASlotPerDatabaseAndAChannelOfItsOwn() throws {
        let cluster = try CacheCluster("eu_west2")
        #expect(cluster.slotName(inDatabase: 16384) == "profile_service_16384_eu_west2")
        #expect(cluster.slotName(inDatabase: 16385) != cluster.slotName(inDatabase: 16384), "another database, another slot")
        #expect(cluster.legacySlotName == "profile_service_cache_eu_west2")
        #expect(cluster.notificationChannel == "profile_changes_eu_west2")
        let configuration = ChangeFeedConfiguration(cluster: cluster)
        #expect(configuration.notificationChannel == cluster.notificationChannel)
        #expect(configuration.consumerName.hasPrefix("profile-service/eu_west2/"))
        #expect(configuration.consumerName.utf8.count <= 63)
    }

    @Test(arguments: ["", "EU", "1st", "eu-west", "eu west", "é", "_x", String(repeating: "a", count: 33), "a;drop"])
    func namesThatCannotNameASlotAreRefused(_ name: String) {
        #expect(throws: CacheCluster.InvalidName.self) { try CacheCluster(name) }
    }

    @Test func theLongestNameInTheLargestDatabaseIdentifierStillMakesASlotNamePostgreSQLKeeps() throws {
        let cluster = try CacheCluster(String(repeating: "z", count: CacheCluster.maximumNameLength))
        #expect(cluster.slotName(inDatabase: .max).utf8.count <= 63)
        #expect(cluster.legacySlotName.utf8.count <= 63)
    }

    @Test func slotNamesMapBackToTheirClusterInTheirDatabaseAndOtherSlotsAreNotClusters() throws {
        let b = try CacheCluster("b")
        #expect(CacheCluster(slotName: "profile_service_16384_default", inDatabase: 16384) == .default)
        #expect(CacheCluster(slotName: "profile_service_16384_b", inDatabase: 16384) == b)
        #expect(CacheCluster(slotName: "profile_service_16385_b", inDatabase: 16384) == nil, "another database's")
        #expect(CacheCluster(slotName: "profile_service_163845_b", inDatabase: 16384) == nil)
        #expect(CacheCluster(slotName: "profile_service_16384_B", inDatabase: 16384) == nil)
        // Slots named before names carried their database: kept where they are.
        #expect(CacheCluster(slotName: "profile_service_cache", inDatabase: 16384) == .default)
        #expect(CacheCluster(slotName: "profile_service_cache_b", inDatabase: 16384) == b)
        #expect(CacheCluster(slotName: "profile_service_cache_default", inDatabase: 16384) == nil)
        #expect(CacheCluster(slotName: "profile_service_cacheb", inDatabase: 16384) == nil)
        #expect(CacheCluster(slotName: "profile_service_cache_B", inDatabase: 16384) == nil)
        #expect(CacheCluster(slotName: "test_feed_1", inDatabase: 16384) == nil)
    }

    @Test func noSlotNameReadsAsTwoClusters() throws {
        // A cluster's name starts with a letter, a database's identifier is digits.
        let names = try ["default", "b", "cache", "cache_b", "x16384_b"].map { try CacheCluster($0) }
        for cluster in names {
            for slot in [cluster.legacySlotName, cluster.slotName(inDatabase: 16384)] {
                #expect(CacheCluster(slotName: slot, inDatabase: 16384) == cluster, "\(slot)")
            }
        }
    }

    static func slot(_ name: String, active: Bool, consumer: String? = nil) -> LogicalReplicationSetup.NamedSlot {
        LogicalReplicationSetup.NamedSlot(
            name: name,
            status: .init(confirmedFlushLSN: LSN(rawValue: 100), isActive: active, lagBytes: 40, walStatus: "reserved", retainedBytes: 900),
            consumer: consumer)
    }

    /// The clusters' slots among `slots` of the database 16384.
    static func clusters(_ slots: [LogicalReplicationSetup.NamedSlot]) -> [(cluster: CacheCluster, slot: LogicalReplicationSetup.NamedSlot)] {
        CacheClusterSlots.clusters(of: slots, inDatabase: 16384)
    }

    @Test func theMonitorCountsHowLongAClusterHasGoneUnconsumedAndForgetsADroppedOne() throws {
        let monitor = ChangeFeedMonitor(enabled: true, cluster: .default)
        let start = ContinuousClock.now
        monitor.recordClusters(
            Self.clusters([
                Self.slot("profile_service_cache", active: true, consumer: "profile-service/default/a/1"),
                Self.slot("profile_service_16384_far", active: false), Self.slot("test_feed_9", active: false),
            ]), now: start)
        var clusters = monitor.current.clusters
        #expect(clusters.map(\.cluster.name) == ["default", "far"], "other slots are not clusters")
        #expect(clusters[0].isConsumed && clusters[0].consumer == "profile-service/default/a/1")
        #expect(clusters.map(\.slot) == ["profile_service_cache", "profile_service_16384_far"])
        #expect(clusters[1].unconsumedSeconds == 0, "first seen unconsumed now")

        monitor.recordClusters(
            Self.clusters([Self.slot("profile_service_cache", active: false), Self.slot("profile_service_16384_far", active: false)]),
            now: start + .seconds(90))
        clusters = monitor.current.clusters
        #expect(clusters[1].unconsumedSeconds == 90)
        #expect(clusters[0].unconsumedSeconds == 0, "default's consumer left only now")

        monitor.recordClusters(
            Self.clusters([Self.slot("profile_service_cache", active: true), Self.slot("profile_service_16384_far", active: true)]),
            now: start + .seconds(100))
        monitor.recordClusters(Self.clusters([Self.slot("profile_service_cache", active: true)]), now: start + .seconds(200))
        clusters = monitor.current.clusters
        #expect(clusters.map(\.cluster.name) == ["default"], "a dropped slot leaves the report")
        #expect(clusters[0].unconsumedSeconds == 0)
    }

    @Test func aNodeSetIsItsNodesInAnyOrder() {
        let a = MemcachedServer(host: "10.0.0.1", port: 11211)
        let b = MemcachedServer(host: "10.0.0.2", port: 11211)
        #expect(CacheClusterNodeSet.key([b, a]) == "10.0.0.1:11211,10.0.0.2:11211")
        #expect(CacheClusterNodeSet.key([a, b]) == CacheClusterNodeSet.key([b, a, b]))
        #expect(CacheClusterNodeSet.key([a]) != CacheClusterNodeSet.key([a, b]))
    }

    @Test func instancesOfOneClusterWithOtherNodesAreTwoNodeSetsOfThatCluster() throws {
        let grouped = CacheClusterNodeSet.grouped([
            ("default", "10.0.0.1:11211,10.0.0.2:11211", "profile-service/default/a/1"),
            ("default", "10.1.0.1:11211", "profile-service/default/b/7"),
            ("default", "10.0.0.1:11211,10.0.0.2:11211", "profile-service/default/a/2"),
            ("eu", "10.2.0.1:11211", "profile-service/eu/c/3"),
            ("Not A Cluster", "10.3.0.1:11211", "x"),
        ])
        #expect(grouped.count == 2, "names that are no cluster's are left out")
        #expect(
            grouped[.default] == [
                CacheClusterNodeSet(
                    nodes: ["10.0.0.1:11211", "10.0.0.2:11211"],
                    instances: ["profile-service/default/a/1", "profile-service/default/a/2"]),
                CacheClusterNodeSet(nodes: ["10.1.0.1:11211"], instances: ["profile-service/default/b/7"]),
            ])
        #expect(grouped[try CacheCluster("eu")]?.count == 1)
    }

    @Test func theMonitorKeepsItsOwnClustersNodeSetsForReadiness() throws {
        let monitor = ChangeFeedMonitor(enabled: true, cluster: try CacheCluster("eu"))
        let eu = [
            CacheClusterNodeSet(nodes: ["10.2.0.1:11211"], instances: ["profile-service/eu/c/3"]),
            CacheClusterNodeSet(nodes: ["10.2.0.9:11211"], instances: ["profile-service/eu/d/4"]),
        ]
        let own = monitor.recordNodeSets([.default: [eu[0]], try CacheCluster("eu"): eu])
        #expect(own == eu)
        #expect(monitor.current.nodeSets == eu, "its own cluster's, not default's")
        monitor.recordNodeSets([.default: [eu[0]]])
        #expect(monitor.current.nodeSets.isEmpty, "no live instance of its cluster (not even itself) yet")
    }
}
