import Foundation
import MemcachedClient
import Testing
import ProfileServiceTesting
import TestSupport

@testable import ProfileService

/// Outages on the in-memory backends, each test with a cluster and a database of its own (an
/// injected fault; ProfileServiceIntegrationTests stops the real servers for the same rules).
@Suite struct InMemoryOutageTests {
    @Test func everyNodeFailedReadsAndWritesStillSucceed() throws {
        let cluster = InMemoryCache(nodes: 2)
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends(cluster: cluster, database: InMemoryDatabase())
        let profile = try backends.seed()
        let repository = backends.repository(shared)
        _ = try repository.read(id: profile.id)

        for server in cluster.servers { cluster.fail(server) }
        let read = try #require(try repository.read(id: profile.id))
        #expect(read.version == 1)
        #expect(read.cacheOutcome == .error)
        let outcome = try repository.updateDisplayName(id: profile.id, to: "While down", expectedVersion: 1)
        guard case .updated(let updated) = outcome else {
            Issue.record("update failed with every node failed: \(outcome)")
            return
        }
        #expect(shared.statistics.count(.writeThroughFailed) >= 1)
        #expect(try repository.read(id: profile.id, minVersion: updated.version)?.version == 2, "read-your-writes")

        for server in cluster.servers { cluster.heal(server) }
        // The nodes kept version 1 through the outage: the floor still reads past it.
        #expect(try repository.read(id: profile.id, minVersion: 2)?.version == 2)
    }

    @Test func theDatabaseDownServesHitsAndRefusesTheRest() throws {
        let database = InMemoryDatabase()
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends(cluster: InMemoryCache(nodes: 2), database: database)
        let cached = try backends.seed()
        let uncached = try backends.seed()
        let repository = backends.repository(shared)
        _ = try repository.read(id: cached.id)

        database.setUnavailable(true)
        #expect(try repository.read(id: cached.id)?.cacheOutcome == .hit)
        #expect(throws: ProfileStoreError.unavailable) { try repository.read(id: uncached.id) }
        #expect(throws: ProfileStoreError.unavailable) {
            try repository.updateDisplayName(id: cached.id, to: "No", expectedVersion: 1)
        }

        database.setUnavailable(false)
        #expect(try repository.read(id: uncached.id)?.version == 1)
        #expect(try repository.read(id: cached.id)?.version == 1, "the refused write changed nothing")
        let outcome = try repository.updateDisplayName(id: cached.id, to: "Back", expectedVersion: 1)
        guard case .updated(let updated) = outcome else {
            Issue.record("update failed after the database came back: \(outcome)")
            return
        }
        #expect(updated.version == 2)
    }
}
