import Foundation
import Glibc
import Logging
import MemcachedClient
import PostgresClient
import Testing
import TestSupport

/// Two cache clusters on one PostgreSQL, as two regions run them: region A is the default
/// cluster (deps.sh's memcached), region B names its own (`--cache-cluster`, two memcached nodes
/// of the test's) and reaches PostgreSQL directly or across a 30 ms round trip (the delay proxy,
/// scripts/delay.sh). docs/design.md §3.10.
///
/// - A PUT through A, an `UPDATE` in psql and a PUT through B are each served new by both
///   regions within 2 s, and B's writer reads its own write at once (`min_version`).
/// - Region B's consumer SIGKILLed: the other region-B instance takes the slot, and every change
///   made while B had no consumer reaches B's cluster.
/// - Region B's consumer frozen (its connections open, nothing answered): the other region-B
///   instance takes the slot once the walsender's timeout — the feed's own, 15 s — ends it.
/// - `cache-cluster drop` refuses a cluster an instance consumes and drops one that is gone.
/// - Two databases of one server (production and staging), each with its instance and memcached,
///   both the default cluster: each has a slot of its own, repairs its own cache, and sees and
///   drops only its own slots.
/// - Two instances of one cluster name given different memcached nodes: `/readyz` and
///   `profile_service_cache_cluster_node_sets` show both node sets, and one again once one stops.
@Suite(.serialized, .requires(.postgres, .memcached)) struct CacheClustersEndToEndTests {
    /// Region B's round trip to PostgreSQL in the far-region case.
    static let wanRoundTripMS = 30
    /// Where the test's delay proxy may listen: deps.sh's PostgreSQL port + one of these (the
    /// benchmarks' proxy uses 1000, so the two never collide). The next is tried when a port is
    /// still held by a connection of an earlier proxy (TIME_WAIT, a minute).
    static let wanPortOffsets = [3000, 3100, 3200, 3300]

    // MARK: - The tests

    @Test(arguments: [0, wanRoundTripMS])
    func aPutThroughEitherRegionAndAnUpdateInPsqlReachBothRegionsWithinTwoSeconds(regionBRoundTripMS: Int) throws {
        let wan = regionBRoundTripMS > 0 ? try WideAreaLink(roundTripMS: regionBRoundTripMS) : nil
        defer { wan?.stop() }
        let region = try RegionB(databaseURL: wan?.databaseURL)
        defer { region.stop() }
        let a = try ServiceProcess(arguments: ServiceProcess.jwtArguments + ["--no-access-log"])
        defer { _ = a.terminate() }
        let b = try region.instance()
        try requireEveryClusterConsumed(seenBy: [a, b], clusters: ["default", region.cluster])

        let connection = try primary()
        defer { connection.close() }
        let ids = try insertProfiles(20, on: connection)
        try readThrough([a, b], ids: ids)
        let regionBCache = try region.nodes.connection()
        defer { regionBCache.close() }
        #expect(ids.allSatisfy { cachedVersion(regionBCache, id: $0) == 1 }, "region B's cluster holds every profile")

        // Region B's live updates hear of changes on its own cluster's channel.
        let streams = try ids[0...1].map { id in
            let stream = try EventStreamTestClient(port: b.port, path: "/users/profile/\(id)/events")
            #expect(try stream.nextEvent(within: .seconds(2))?.id == "1", "the stream starts at the current version")
            return stream
        }

        // 1. A PUT through region A (times from its answer).
        let throughA = try put(ids[0], version: 1, name: "Through A", via: a)
        var changed = Date()
        #expect(throughA?.version == 2)
        let servedA = served(ids[0], atLeast: 2, by: [a, b], since: changed)

        // 2. An UPDATE at a psql prompt, as an operator writes it (times from psql's exit).
        let psql = try TestProcess.run(
            URL(fileURLWithPath: "/usr/bin/psql"),
            [
                TestEnvironment.databaseURL, "-v", "ON_ERROR_STOP=1", "-c",
                "UPDATE user_profiles SET display_name = 'Support', version = version + 1 WHERE id = \(ids[1])",
            ])
        changed = Date()
        #expect(psql.status == 0, "\(psql.standardError)")
        let servedSQL = served(ids[1], atLeast: 2, by: [a, b], since: changed)

        // 3. A PUT through region B; its writer reads it back with the version it was given.
        let throughB = try put(ids[2], version: 1, name: "Through B", via: b)
        changed = Date()
        #expect(throughB?.version == 2)
        let servedB = served(ids[2], atLeast: 2, by: [a, b], since: changed)
        let own = try Curl.request("\(b.baseURL)/users/profile/\(ids[2])?min_version=2")
        #expect(own.status == 200 && own.json?["display_name"] as? String == "Through B", "read-your-writes in region B")

        for (change, times) in [("PUT through A", servedA), ("UPDATE in psql", servedSQL), ("PUT through B", servedB)] {
            #expect(times.allSatisfy { $0 != nil }, "\(change) is served by both regions within 2 s: \(times)")
            print(
                "cache clusters (region B +\(regionBRoundTripMS) ms): \(change) served by A after "
                    + "\(Self.milliseconds(times[0])), by B after \(Self.milliseconds(times[1]))")
        }
        for (stream, id) in zip(streams, ids[0...1]) {
            #expect(
                try stream.nextEvent(within: .seconds(2))?.id == "2",
                "a stream of \(id) in region B gets the change made through A or in SQL")
        }
        let regionB = cacheClusters(seenBy: a)[region.cluster]
        #expect(
            (regionB?["consumer"] as? String)?.hasPrefix("profile-service/\(region.cluster)/") == true,
            "region A's /readyz names region B's consumer: \(regionB ?? [:])")
        // Region B's cluster holds the changes: repaired, not only read around.
        #expect(
            Eventually.wait(timeout: .seconds(2)) { ids[0...2].allSatisfy { cachedVersion(regionBCache, id: $0) == 2 } },
            "region B's cluster holds version 2 of the three changed profiles")

        // Gone clusters: refused while consumed, dropped once gone, and seen by the others meanwhile.
        let refused = try ServiceProcess.run(
            ["cache-cluster", "drop", region.cluster, "--database-url", TestEnvironment.databaseURL])
        #expect(refused.status == 1 && refused.standardError.contains("consumed now"), "\(refused.standardError)")
        #expect(b.terminate() == 0)
        #expect(
            Eventually.wait(timeout: .seconds(15), interval: .milliseconds(200)) {
                cacheClusters(seenBy: a)[region.cluster]?["consumed"] as? Bool == false
            }, "region A's /readyz sees region B's cluster without a consumer: \(cacheClusters(seenBy: a))")
        try dropCluster(region.cluster)
        let list = try ServiceProcess.run(["cache-cluster", "list", "--json", "--database-url", TestEnvironment.databaseURL])
        let listed = (try? JSONSerialization.jsonObject(with: Data(list.standardOutput.utf8))) as? [[String: Any]]
        #expect(listed?.contains { $0["cluster"] as? String == "default" } == true, "\(list.standardOutput)")
        #expect(listed?.contains { $0["cluster"] as? String == region.cluster } == false, "dropped: \(list.standardOutput)")
    }

    /// Region A's instance (the default cluster) beside two of region B's, every cluster consumed:
    /// `consumer` streams region B's slot, `survivor` stands by, and `count` profiles inserted on
    /// `connection` (to the primary) are cached by all three. Everything is stopped after `body`.
    private func withRegionBConsumerAndStandby(
        profiles count: Int,
        _ body: (
            _ a: ServiceProcess, _ region: RegionB, _ consumer: ServiceProcess, _ survivor: ServiceProcess,
            _ connection: PostgresConnection, _ ids: [Int64]
        ) throws -> Void
    ) throws {
        let region = try RegionB()
        defer { region.stop() }
        let a = try ServiceProcess(arguments: ServiceProcess.jwtArguments + ["--no-access-log"])
        defer { _ = a.terminate() }
        defer { try? dropCluster(region.cluster) }  // after the instances stop: defers run last first
        let instances = [try region.instance(), try region.instance()]
        defer { for instance in instances { _ = instance.terminate() } }
        try requireEveryClusterConsumed(seenBy: [a] + instances, clusters: ["default", region.cluster])
        let consumer = try #require(instances.first { feedState($0) == "active" }, "one region-B instance consumes")
        let survivor = try #require(instances.first { $0 !== consumer })
        #expect(feedState(survivor) == "standby")
        let connection = try primary()
        defer { connection.close() }
        let ids = try insertProfiles(count, on: connection)
        try readThrough([a, consumer, survivor], ids: ids)
        try body(a, region, consumer, survivor, connection, ids)
    }

    @Test func regionBsConsumerKilledAnotherRegionBInstanceTakesItsSlotAndMissesNoChange() throws {
        try withRegionBConsumerAndStandby(profiles: 20) { a, region, consumer, survivor, connection, ids in
            kill(consumer.processIdentifier, SIGKILL)
            _ = consumer.waitUntilExit()
            let killed = Date()
            // While region B has no consumer: half the profiles changed in SQL, half through region A.
            try connection.simpleQuery(
                "UPDATE user_profiles SET display_name = 'While B was down', version = version + 1 "
                    + "WHERE id BETWEEN \(ids[0]) AND \(ids[9])")
            for id in ids[10...] { #expect(try put(id, version: 1, name: "Through A", via: a)?.version == 2) }

            #expect(
                Eventually.wait(timeout: .seconds(10), interval: .milliseconds(20)) { feedState(survivor) == "active" },
                "the other region-B instance takes the slot over")
            let tookOver = Date().timeIntervalSince(killed)
            let regionBCache = try region.nodes.connection()
            defer { regionBCache.close() }
            let repaired = Eventually.wait(timeout: .seconds(3)) { ids.allSatisfy { cachedVersion(regionBCache, id: $0) == 2 } }
            let stale = ids.filter { cachedVersion(regionBCache, id: $0) != 2 }
            #expect(repaired, "every change made while region B had no consumer reached its cluster; not: \(stale)")
            for id in ids {
                let served = try Curl.request("\(survivor.baseURL)/users/profile/\(id)").json?["version"] as? Int
                #expect(served == 2, "region B serves \(id) at version 2")
            }
            print("cache clusters: region B's consumer SIGKILLed; the other instance consumed after \(Int(tookOver * 1000)) ms")
        }
    }

    /// A consumer that vanishes without closing its connection — its host gone, a partition, here a
    /// frozen process (SIGSTOP) — holds its cluster's slot until its walsender times out. The feed
    /// sets that timeout on its own session (`ChangeFeedConfiguration.senderTimeout`, 15 s), so the
    /// takeover does not wait for the server's (PostgreSQL's default 60 s, deps.sh's 30 s).
    @Test func regionBsConsumerFrozenAnotherRegionBInstanceTakesItsSlotWithinTheFeedsSenderTimeout() throws {
        try withRegionBConsumerAndStandby(profiles: 10) { a, region, consumer, survivor, connection, ids in
            kill(consumer.processIdentifier, SIGSTOP)
            defer {
                kill(consumer.processIdentifier, SIGKILL)
                _ = consumer.waitUntilExit()
            }
            let frozen = Date()
            try connection.simpleQuery(
                "UPDATE user_profiles SET display_name = 'While B was frozen', version = version + 1 "
                    + "WHERE id BETWEEN \(ids[0]) AND \(ids[9])")
            let tookOver = Eventually.wait(timeout: .seconds(25), interval: .milliseconds(100)) {
                feedState(survivor) == "active"
            }
            let after = Date().timeIntervalSince(frozen)
            #expect(tookOver && after < 20, "the other region-B instance takes the slot within 20 s, not after \(Int(after)) s")
            let regionBCache = try region.nodes.connection()
            defer { regionBCache.close() }
            #expect(
                Eventually.wait(timeout: .seconds(3)) { ids.allSatisfy { cachedVersion(regionBCache, id: $0) == 2 } },
                "every change made while region B's consumer was frozen reached its cluster")
            print("cache clusters: region B's consumer frozen (SIGSTOP); the other instance consumed after \(Int(after * 1000)) ms")
        }
    }

    /// Production (deps.sh's database and memcached) and staging (a database of its own on the same
    /// server, a memcached node of its own), each with an instance of the default cluster.
    @Test func twoDatabasesOnOneServerEachRepairTheirOwnCacheAndSeeAndDropOnlyTheirOwnSlots() throws {
        let staging = try TestDatabase.Own(prefix: "profiles_staging")
        defer { staging.drop() }
        try staging.migrate()
        let stagingNodes = try MemcachedNodes(count: 1)
        defer { stagingNodes.stop() }
        let production = try ServiceProcess(arguments: ServiceProcess.jwtArguments + ["--no-access-log"])
        defer { _ = production.terminate() }
        let stage = try ServiceProcess(
            arguments: ServiceProcess.jwtArguments + [
                "--no-access-log", "--database-url", staging.url, "--memcached", stagingNodes.serverList,
            ])
        defer { _ = stage.terminate() }
        for (name, instance) in [("production", production), ("staging", stage)] {
            #expect(
                Eventually.wait(timeout: .seconds(15), interval: .milliseconds(100)) { feedState(instance) == "active" },
                "\(name)'s feed streams a slot of its own: \(feedState(instance) ?? "no answer")")
        }

        // The same ids in both databases, read through each instance into its own cache.
        let connection = try primary()
        defer { connection.close() }
        let ids = try insertProfiles(2, on: connection)
        let inserted = try TestDatabase.Own.psql(
            staging.url,
            "INSERT INTO user_profiles (id, username, display_name) VALUES "
                + ids.map { "(\($0), 'stg\($0)', 'Staging \($0)')" }.joined(separator: ", "))
        #expect(inserted.status == 0, "\(inserted.standardError)")
        try readThrough([production, stage], ids: ids)

        // An UPDATE at a psql prompt in each database (times from psql's exit).
        let productionCache = try MemcachedConnection(
            configuration: try MemcachedConfiguration(servers: TestEnvironment.memcachedServerList), logger: Logger(label: "test"))
        defer { productionCache.close() }
        let stagingCache = try stagingNodes.connection()
        defer { stagingCache.close() }
        for (database, url, id, instance, cache) in [
            ("production", TestEnvironment.databaseURL, ids[0], production, productionCache),
            ("staging", staging.url, ids[1], stage, stagingCache),
        ] {
            let psql = try TestDatabase.Own.psql(
                url, "UPDATE user_profiles SET display_name = 'Support', version = version + 1 WHERE id = \(id)")
            let changed = Date()
            #expect(psql.status == 0, "\(psql.standardError)")
            let served = served(id, atLeast: 2, by: [instance], since: changed)[0]
            #expect(served != nil, "an UPDATE in \(database) is served by its instance within 2 s")
            #expect(cachedVersion(cache, id: id) == 2, "\(database)'s memcached holds the change")
            print("two databases: an UPDATE in \(database) served by its instance after \(Self.milliseconds(served))")
        }
        #expect(cachedVersion(productionCache, id: ids[1]) == 1, "staging's change is not production's")
        #expect(cachedVersion(stagingCache, id: ids[0]) == 1, "production's change is not staging's")

        // `cache-cluster list` in each shows its own slots only.
        let productionSlots = try listedSlots(TestEnvironment.databaseURL)
        let stagingSlots = try listedSlots(staging.url)
        #expect(stagingSlots.map(\.cluster) == ["default"], "staging has one cluster: \(stagingSlots)")
        let productionDefault = productionSlots.first { $0.cluster == "default" }?.slot
        let stagingDefault = try #require(stagingSlots.first?.slot)
        #expect(productionDefault != nil && productionDefault != stagingDefault, "\(productionSlots) \(stagingSlots)")
        #expect(!productionSlots.contains { $0.slot == stagingDefault }, "production lists no slot of staging's")

        // `cache-cluster drop` never reaches another database's slot: not from production, whose
        // own is consumed, nor from a database with none; staging's own drop takes staging's.
        #expect(stage.terminate() == 0)
        let empty = try TestDatabase.Own(prefix: "profiles_empty")
        defer { empty.drop() }
        for (url, refusal) in [(TestEnvironment.databaseURL, "consumed now"), (empty.url, "no replication slot")] {
            let refused = try ServiceProcess.run(["cache-cluster", "drop", "default", "--database-url", url])
            #expect(refused.status == 1 && refused.standardError.contains(refusal), "\(refused.standardError)")
        }
        #expect(try listedSlots(staging.url).map(\.slot) == [stagingDefault], "staging's slot is still there")
        var last: TestProcess.Finished?
        #expect(
            try Eventually.wait(timeout: .seconds(10), interval: .milliseconds(200)) {
                last = try ServiceProcess.run(["cache-cluster", "drop", "default", "--database-url", staging.url])
                return last?.status == 0
            }, "\(last?.standardError ?? "")")
        #expect(last?.standardOutput.contains("dropped replication slot \(stagingDefault) ") == true)
        #expect(try listedSlots(staging.url).isEmpty)
        #expect(try listedSlots(TestEnvironment.databaseURL).contains { $0.slot == productionDefault }, "production's stays")
        #expect(feedState(production) == "active")
    }

    /// Region B started with region A's cluster name (the `--cache-cluster` an operator missed):
    /// one slot, one consumer, and the other instance's nodes never repaired. Both instances report
    /// the two node sets; both stay ready.
    @Test func instancesOfOneClusterNameWithOtherMemcachedNodesReportBothNodeSets() throws {
        let cluster = "sets_\(UInt32.random(in: 0...UInt32.max))"
        let nodes = [try MemcachedNodes(count: 1), try MemcachedNodes(count: 1)]
        defer { for node in nodes { node.stop() } }
        defer { try? dropCluster(cluster) }  // after the instances stop: defers run last first
        let instances = try nodes.map { node in
            try ServiceProcess(
                arguments: ServiceProcess.jwtArguments + [
                    "--no-access-log", "--cache-cluster", cluster, "--memcached", node.serverList,
                ])
        }
        defer { for instance in instances { _ = instance.terminate() } }
        let expected = Set(nodes.map { [$0.serverList] })
        for instance in instances {
            #expect(
                Eventually.wait(timeout: .seconds(20), interval: .milliseconds(200)) {
                    Set(nodeSets(instance).map(\.nodes)) == expected
                }, ":\(instance.port) names both node sets: \(nodeSets(instance))")
            let readyz = try Curl.request("\(instance.baseURL)/readyz")
            #expect(readyz.status == 200, "two node sets warn, they do not make an instance unready")
            #expect((readyz.json?["change_feed"] as? [String: Any])?["cluster"] as? String == cluster)
            #expect(nodeSets(instance).allSatisfy { $0.instances.count == 1 && $0.instances[0].hasPrefix("profile-service/\(cluster)/") })
            #expect(try instance.metrics().value("profile_service_cache_cluster_node_sets", ["cluster": cluster]) == 2)
        }
        #expect(
            instances.contains { $0.log(waitingUntil: { $0.contains("serve different memcached nodes") }).contains("serve different memcached nodes") },
            "the instances log the two node sets")

        // The second instance stops (a replacement finished): one node set again.
        #expect(instances[1].terminate() == 0)
        #expect(
            Eventually.wait(timeout: .seconds(20), interval: .milliseconds(200)) {
                nodeSets(instances[0]).map(\.nodes) == [[nodes[0].serverList]]
            }, "one node set once the other instance stopped: \(nodeSets(instances[0]))")
        #expect(try instances[0].metrics().value("profile_service_cache_cluster_node_sets", ["cluster": cluster]) == 1)
    }

    /// The node sets an instance's `/readyz` reports for its cache cluster.
    private func nodeSets(_ instance: ServiceProcess) -> [(nodes: [String], instances: [String])] {
        let feed = (try? Curl.request("\(instance.baseURL)/readyz"))?.json?["change_feed"] as? [String: Any]
        return (feed?["node_sets"] as? [[String: Any]] ?? []).map { set in
            (set["nodes"] as? [String] ?? [], set["instances"] as? [String] ?? [])
        }
    }

    /// `cache-cluster list --json` of one database: each cluster and its slot.
    private func listedSlots(_ databaseURL: String) throws -> [(cluster: String, slot: String)] {
        let list = try ServiceProcess.run(["cache-cluster", "list", "--json", "--database-url", databaseURL])
        #expect(list.status == 0, "\(list.standardError)")
        let listed = (try? JSONSerialization.jsonObject(with: Data(list.standardOutput.utf8))) as? [[String: Any]] ?? []
        return listed.compactMap { item in
            guard let cluster = item["cluster"] as? String, let slot = item["slot"] as? String else { return nil }
            return (cluster, slot)
        }
    }

    // MARK: - Region B

    /// Region B: two memcached nodes of its own, a cluster name of its own, its instances.
    final class RegionB {
        let nodes: MemcachedNodes
        let cluster = "region_b_\(UInt32.random(in: 0...UInt32.max))"
        let databaseURL: String?

        init(databaseURL: String? = nil) throws {
            nodes = try MemcachedNodes(count: 2)
            self.databaseURL = databaseURL
        }

        func instance() throws -> ServiceProcess {
            try ServiceProcess(
                arguments: ServiceProcess.jwtArguments + [
                    "--no-access-log", "--cache-cluster", cluster, "--memcached", nodes.serverList,
                ] + (databaseURL.map { ["--database-url", $0] } ?? []))
        }

        func stop() { nodes.stop() }
    }

    /// Region B's way to PostgreSQL across a WAN: the delay proxy of scripts/delay.sh, with a
    /// directory and ports of its own.
    final class WideAreaLink {
        let databaseURL: String
        private let environment: [String: String]

        init(roundTripMS: Int) throws {
            var started: (offset: Int, environment: [String: String])?
            for offset in CacheClustersEndToEndTests.wanPortOffsets {
                let environment = [
                    "PROFILE_DELAY_DIR": "\(TestEnvironment.stateDirectory)/delay-regions",
                    "PROFILE_DELAY_PORT_OFFSET": String(offset),
                ]
                if try TestEnvironment.script("scripts/delay.sh", ["start", String(roundTripMS)], environment: environment) == 0 {
                    started = (offset, environment)
                    break
                }
            }
            let link = try #require(started, "scripts/delay.sh start \(roundTripMS) failed at every offset (its messages are above)")
            environment = link.environment
            databaseURL = "postgres://postgres@127.0.0.1:\(TestEnvironment.postgresPort + link.offset)/profiles"
        }

        func stop() {
            #expect((try? TestEnvironment.script("scripts/delay.sh", ["stop"], environment: environment)) == 0)
        }
    }

    // MARK: - Helpers

    private func primary() throws -> PostgresConnection { try TestDatabase.primary() }

    private func insertProfiles(_ count: Int, on connection: PostgresConnection) throws -> [Int64] {
        try TestDatabase.insertProfiles(
            count, blocks: 3_000_000_000...4_000_000_000, usernamePrefix: "cc", namePrefix: "Region", on: connection)
    }

    /// Reads every id through every instance, so that every cluster holds them.
    private func readThrough(_ instances: [ServiceProcess], ids: [Int64]) throws {
        for instance in instances {
            for id in ids {
                #expect(try Curl.request("\(instance.baseURL)/users/profile/\(id)").status == 200)
            }
        }
    }

    private func put(_ id: Int64, version: Int, name: String, via instance: ServiceProcess) throws -> (version: Int, status: Int)? {
        let response = try Curl.request(
            "\(instance.baseURL)/users/profile/\(id)", method: "PUT", headers: ServiceProcess.writeHeaders(for: id),
            body: #"{"display_name":"\#(name)","version":\#(version)}"#)
        #expect(response.status == 200, "\(response.body)")
        return (response.json?["version"] as? Int).map { ($0, response.status) }
    }

    /// For each instance, how long after `since` it first served `id` at `version` or later;
    /// nil if not within 2 s. Polled every 2 ms over a keep-alive connection to each.
    private func served(_ id: Int64, atLeast version: Int, by instances: [ServiceProcess], since: Date) -> [TimeInterval?] {
        var times: [TimeInterval?] = Array(repeating: nil, count: instances.count)
        let clients = instances.map { try? HTTPTestClient(port: $0.port) }
        let deadline = since.addingTimeInterval(2)
        while Date() < deadline, times.contains(where: { $0 == nil }) {
            for (index, client) in clients.enumerated() where times[index] == nil {
                guard let client, (try? client.send("GET /users/profile/\(id) HTTP/1.1\r\nHost: test\r\n\r\n")) != nil,
                    let response = try? client.readResponse(),
                    let body = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
                else { continue }
                if let served = body["version"] as? Int, served >= version { times[index] = Date().timeIntervalSince(since) }
            }
            usleep(2_000)
        }
        return times
    }

    private func cachedVersion(_ cache: MemcachedConnection, id: Int64) -> Int32? {
        guard case .hit(let item) = cache.get(ProfileCacheEntries.key(for: id)) else { return nil }
        return ProfileCacheEntries.version(of: item.value)
    }

    private func feedState(_ instance: ServiceProcess) -> String? {
        ((try? Curl.request("\(instance.baseURL)/readyz"))?.json?["change_feed"] as? [String: Any])?["state"] as? String
    }

    /// The cache clusters an instance's `/readyz` reports, by name.
    private func cacheClusters(seenBy instance: ServiceProcess) -> [String: [String: Any]] {
        let list = (try? Curl.request("\(instance.baseURL)/readyz"))?.json?["cache_clusters"] as? [[String: Any]] ?? []
        return Dictionary(list.compactMap { item in (item["name"] as? String).map { ($0, item) } }) { first, _ in first }
    }

    /// Fails the test unless every instance's `/readyz` shows each of `clusters` consumed within 15 s.
    func requireEveryClusterConsumed(seenBy instances: [ServiceProcess], clusters: [String]) throws {
        for instance in instances {
            try #require(
                Eventually.wait(timeout: .seconds(15), interval: .milliseconds(100)) {
                    let seen = cacheClusters(seenBy: instance)
                    return clusters.allSatisfy { seen[$0]?["consumed"] as? Bool == true }
                }, ":\(instance.port) sees every cluster consumed: \(cacheClusters(seenBy: instance))")
        }
    }

    /// Drops a cluster's slot with the command an operator runs, retrying while its last
    /// walsender lets go of it.
    private func dropCluster(_ cluster: String) throws {
        var last: TestProcess.Finished?
        let dropped = try Eventually.wait(timeout: .seconds(10), interval: .milliseconds(200)) {
            last = try ServiceProcess.run(["cache-cluster", "drop", cluster, "--database-url", TestEnvironment.databaseURL])
            return last?.status == 0
        }
        #expect(dropped, "cache-cluster drop \(cluster): \(last?.standardError ?? "")")
        // Named for the database (no slot of the older name was made for a cluster this new).
        #expect(
            last?.standardOutput.range(of: "dropped replication slot profile_service_[0-9]+_\(cluster) ", options: .regularExpression)
                != nil, "\(last?.standardOutput ?? "")")
    }

    private static func milliseconds(_ time: TimeInterval?) -> String {
        time.map { "\(Int(($0 * 1000).rounded())) ms" } ?? "never"
    }
}
