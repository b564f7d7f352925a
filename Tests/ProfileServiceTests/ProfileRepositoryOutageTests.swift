import Foundation
import Glibc
import MemcachedClient
import Testing
import TestSupport

@testable import ProfileService

/// memcached or PostgreSQL stopped mid-test, then restarted (scripts/deps.sh, by pid).
@Suite(.serialized) struct ProfileRepositoryOutageTests {
    private func waitUntil(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(100_000)
        }
        return false
    }

    @Test func memcachedDownReadsAndWritesStillSucceed() throws {
        let shared = ProfileCacheShared()
        let backends = try IntegrationBackends()
        let profile = try backends.seed()
        let repository = backends.repository(shared)
        _ = try repository.read(id: profile.id)

        try TestEnvironment.deps("stop-memcached", "1")
        try TestEnvironment.deps("stop-memcached", "2")
        defer {
            _ = try? TestEnvironment.deps("start-memcached", "1")
            _ = try? TestEnvironment.deps("start-memcached", "2")
        }
        let read = try #require(try repository.read(id: profile.id))
        #expect(read.version == 1)
        #expect(read.cacheOutcome == .error)
        let outcome = try repository.updateDisplayName(id: profile.id, to: "While down", expectedVersion: 1)
        guard case .updated(let updated) = outcome else {
            Issue.record("update failed with memcached down: \(outcome)")
            return
        }
        #expect(shared.statistics.count(.writeThroughFailed) >= 1)
        #expect(try repository.read(id: profile.id, minVersion: updated.version)?.version == 2)

        try TestEnvironment.deps("start-memcached", "1")
        try TestEnvironment.deps("start-memcached", "2")
        // Back after the breaker's retry timeout; a restarted node starts empty.
        #expect(waitUntil { (try? repository.read(id: profile.id))?.cacheOutcome != .error })
        #expect(try repository.read(id: profile.id)?.version == 2)
    }

    @Test func postgresDownServesHitsAndRefusesTheRest() throws {
        let shared = ProfileCacheShared()
        let backends = try IntegrationBackends()
        let cached = try backends.seed()
        let uncached = try backends.seed()
        let repository = backends.repository(shared)
        _ = try repository.read(id: cached.id)

        try TestEnvironment.deps("stop-postgres")
        defer { _ = try? TestEnvironment.deps("start-postgres") }
        #expect(try repository.read(id: cached.id)?.cacheOutcome == .hit)
        #expect(throws: ProfileStoreError.unavailable) { try repository.read(id: uncached.id) }
        #expect(throws: ProfileStoreError.unavailable) {
            try repository.updateDisplayName(id: cached.id, to: "No", expectedVersion: 1)
        }

        try TestEnvironment.deps("start-postgres")
        #expect(waitUntil { (try? repository.read(id: uncached.id))?.version == 1 })
        let outcome = try repository.updateDisplayName(id: cached.id, to: "Back", expectedVersion: 1)
        #expect(outcome != .notFound)
    }

    @Test func aHungNodeIsSkippedAfterRepeatedTimeoutsAndComesBack() throws {
        let shared = ProfileCacheShared(circuitBreaker: NodeCircuitBreaker(failureThreshold: 3, openDuration: .seconds(1)))
        let backends = try IntegrationBackends()
        let hungNode = TestEnvironment.memcachedServers[1]
        // A profile whose key lives on the node about to hang.
        var profile = try backends.seed()
        while backends.cache.server(forKey: shared.configuration.key(for: profile.id))?.port != hungNode.port {
            profile = try backends.seed()
        }
        let repository = backends.repository(shared)
        let pid = try TestEnvironment.memcachedPID(port: hungNode.port)

        kill(pid, SIGSTOP)
        defer { kill(pid, SIGCONT) }
        for _ in 0..<4 {
            #expect(try repository.read(id: profile.id)?.version == 1, "reads still succeed from PostgreSQL")
        }
        let server = try #require(backends.cache.server(forKey: shared.configuration.key(for: profile.id)))
        #expect(shared.circuitBreaker.isOpen(server), "after 3 timeouts the node is skipped")
        #expect(try repository.read(id: profile.id)?.cacheOutcome == .error)

        kill(pid, SIGCONT)
        #expect(waitUntil { (try? repository.read(id: profile.id))?.cacheOutcome == .hit })
        #expect(!shared.circuitBreaker.isOpen(server))
    }
}
