import Foundation
import Glibc
import MemcachedClient
import ProfileServiceTesting
import Testing
import TestSupport

@testable import ProfileService

/// memcached or PostgreSQL stopped mid-test, then restarted (scripts/deps.sh, by pid).
@Suite(.serialized, .requires(.postgres, .memcached)) struct ProfileRepositoryOutageTests {
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
        #expect(Eventually.wait { (try? repository.read(id: profile.id))?.cacheOutcome != .error })
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
        #expect(Eventually.wait { (try? repository.read(id: uncached.id))?.version == 1 })
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

        try TestEnvironment.freeze(pid)
        defer { kill(pid, SIGCONT) }
        for _ in 0..<4 {
            #expect(try repository.read(id: profile.id)?.version == 1, "reads still succeed from PostgreSQL")
        }
        let server = try #require(backends.cache.server(forKey: shared.configuration.key(for: profile.id)))
        #expect(shared.circuitBreaker.isOpen(server), "after 3 timeouts the node is skipped")
        #expect(try repository.read(id: profile.id)?.cacheOutcome == .error)

        kill(pid, SIGCONT)
        #expect(Eventually.wait { (try? repository.read(id: profile.id))?.cacheOutcome == .hit })
        #expect(!shared.circuitBreaker.isOpen(server))
    }
}

extension ProfileRepositoryOutageTests {
    /// A read waits on a frozen node (SIGSTOP) at most once, a write at most twice (its repair
    /// delete is always tried): the breaker is kept closed here (a high threshold) to see the
    /// per-request rule alone.
    @Test func aHungNodeCostsEachRequestOnePollTimeoutAtMost() throws {
        let shared = ProfileCacheShared(circuitBreaker: NodeCircuitBreaker(failureThreshold: 1_000))
        let backends = try IntegrationBackends()
        let hungNode = TestEnvironment.memcachedServers[1]
        var profile = try backends.seed()
        while backends.cache.server(forKey: shared.configuration.key(for: profile.id))?.port != hungNode.port {
            profile = try backends.seed()
        }
        let counting = TimeoutCountingCache(backends.cache)
        let repository = backends.repository(shared, cache: counting)
        let stateDirectory = TestEnvironment.variable("PROFILE_STATE_DIR")
            ?? TestEnvironment.repositoryRoot.appendingPathComponent(".state").path
        let pidText = try String(contentsOfFile: "\(stateDirectory)/memcached/\(hungNode.port).pid", encoding: .utf8)
        let pid = try #require(pid_t(pidText.trimmingCharacters(in: .whitespacesAndNewlines)))

        try TestEnvironment.freeze(pid)
        defer { kill(pid, SIGCONT) }
        var version: Int32 = 1
        for _ in 0..<3 {
            counting.timeouts = 0
            #expect(try repository.read(id: profile.id)?.version == version)
            #expect(counting.timeouts == 1, "a read waited \(counting.timeouts) poll timeouts")
            counting.timeouts = 0
            let outcome = try repository.updateDisplayName(id: profile.id, to: "v\(version + 1)", expectedVersion: version)
            guard case .updated(let updated) = outcome else {
                Issue.record("update failed: \(outcome)")
                return
            }
            version = updated.version
            #expect((1...2).contains(counting.timeouts), "a write waited \(counting.timeouts) poll timeouts")
        }
    }
}

/// Counts the operations that came back with a poll timeout.
final class TimeoutCountingCache: CacheClient {
    let base: MemcachedConnection
    var timeouts = 0

    init(_ base: MemcachedConnection) { self.base = base }

    private func count(_ error: MemcachedError?) {
        if error?.code == .timeout { timeouts += 1 }
    }

    func get(_ key: String) -> MemcachedGetResult {
        let result = base.get(key)
        if case .failure(let error) = result { count(error) }
        return result
    }
    func add(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        let result = base.add(key, value: value, flags: flags, expiration: expiration)
        if case .failure(let error) = result { count(error) }
        return result
    }
    func cas(_ key: String, value: [UInt8], cas: UInt64, flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        let result = base.cas(key, value: value, cas: cas, flags: flags, expiration: expiration)
        if case .failure(let error) = result { count(error) }
        return result
    }
    func delete(_ key: String) -> MemcachedDeleteResult {
        let result = base.delete(key)
        if case .failure(let error) = result { count(error) }
        return result
    }
    func server(forKey key: String) -> MemcachedServer? { base.server(forKey: key) }
    func flush(server: MemcachedServer) -> MemcachedError? { base.flush(server: server) }
    var servers: [MemcachedServer] { base.servers }
    func ping(server: MemcachedServer) -> MemcachedError? { base.ping(server: server) }
    func reconnect() { base.reconnect() }
}
