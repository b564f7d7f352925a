import Foundation
import MemcachedClient
import Synchronization
import ProfileServiceTesting
import TestSupport
import Testing

@testable import ProfileService

/// Reads that send their lease with their first lookup (``ReadStrategy``, forced on here): the
/// same protocol in fewer round trips, so the same races must end the same way.
@Suite(.serialized) struct ProfileRepositoryLeaseFirstTests {
    static func leaseFirst(_ hooks: ProfileCacheHooks = .init()) -> ProfileCacheShared {
        var configuration = ProfileCacheConfiguration()
        configuration.leaseFirstMissShare = 0
        return ProfileCacheShared(configuration: configuration, hooks: hooks)
    }

    @Test func strategyFollowsTheShareOfRecentMisses() {
        var strategy = ReadStrategy(leaseFirstMissShare: 0.5)
        #expect(!strategy.leaseFirst, "a new worker reads plainly")
        for _ in 0..<16 { strategy.record(miss: true) }
        #expect(strategy.leaseFirst, "mostly misses: lease first")
        for _ in 0..<16 { strategy.record(miss: false) }
        #expect(!strategy.leaseFirst, "mostly hits again: plain reads")
        var never = ReadStrategy(leaseFirstMissShare: 1.5)
        for _ in 0..<100 { never.record(miss: true) }
        #expect(!never.leaseFirst)
        #expect(ReadStrategy(leaseFirstMissShare: 0).leaseFirst)
    }

    @Test func missPopulatesUnderItsOwnLeaseThenHits() throws {
        let shared = Self.leaseFirst()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let repository = backends.repository(shared)
        #expect(try repository.read(id: profile.id)?.cacheOutcome == .miss)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 1)
        let second = try #require(try repository.read(id: profile.id))
        #expect(second.cacheOutcome == .hit, "the add of a lease over a profile changed nothing")
        #expect(second.json == profile.json)
        #expect(shared.statistics.count(.databaseRead) == 1)
        #expect(shared.statistics.count(.populateStored) == 1)
    }

    @Test func anAbsentProfileReplacesTheLeaseWithTheRecordOfItsAbsence() throws {
        let shared = Self.leaseFirst()
        let backends = try InMemoryBackends()
        let id = Int64.random(in: 9_100_000_000_000_000...9_200_000_000_000_000)
        let repository = backends.repository(shared)
        #expect(try repository.read(id: id) == nil)
        guard case .hit(let item) = backends.cache.get(shared.configuration.key(for: id)) else {
            Issue.record("neither a lease nor a record was left")
            return
        }
        #expect(CacheEntry(decoding: item.value, shape: ProfileFieldCatalog.standard.shape) == .absent, "no lease is left behind")
        #expect(try repository.read(id: id) == nil)
        #expect(shared.statistics.count(.databaseRead) == 1)
    }

    /// A reader paused between its PostgreSQL read and its populate; the writer's version wins.
    @Test func lateReaderDoesNotOverwriteTheWritersVersion() throws {
        let gate = ReaderGate()
        let shared = Self.leaseFirst(.init(afterDatabaseRead: gate.pause))
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let writer = backends.repository(shared)
        let readerSaw = Mutex<Int32?>(nil)
        gate.arm(profile.id)
        let reader = TestThread {
            let readerBackends = try! InMemoryBackends()
            defer { withExtendedLifetime(readerBackends) {} }
            let read = try? readerBackends.repository(shared).read(id: profile.id)
            readerSaw.withLock { $0 = read?.version }
        }
        gate.waitUntilPaused()
        guard case .updated(let updated)? = try? writer.updateDisplayName(id: profile.id, to: "W", expectedVersion: 1)
        else {
            Issue.record("update failed")
            gate.release()
            reader.join()
            return
        }
        #expect(updated.version == 2)
        _ = backends.cache.delete(shared.configuration.key(for: profile.id))  // and evicted, too
        gate.release()
        reader.join()
        #expect(readerSaw.withLock { $0 } == 1)
        #expect(backends.cachedVersion(profile.id, shared: shared) == nil, "version 1 must not land")
        #expect(shared.statistics.count(.populateLost) == 1)
        #expect(try writer.read(id: profile.id)?.version == 2)
    }

    /// Another reader of this process is reading the id, but its lease was evicted and this
    /// reader's landed: it reads and populates itself instead of leaving its lease to block others.
    @Test func aReaderHoldingItsOwnLeaseDoesNotFollowAnotherFlight() throws {
        let gate = ReaderGate()
        let shared = Self.leaseFirst(.init(afterDatabaseRead: gate.pause))
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        gate.arm(profile.id)
        let first = TestThread {
            let readerBackends = try! InMemoryBackends()
            defer { withExtendedLifetime(readerBackends) {} }
            _ = try? readerBackends.repository(shared).read(id: profile.id)
        }
        gate.waitUntilPaused()  // the first reader leads a flight, holding a lease
        _ = backends.cache.delete(shared.configuration.key(for: profile.id))  // its lease evicted
        let second = try #require(try backends.repository(shared).read(id: profile.id))
        #expect(second.version == 1)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 1, "populated under the second reader's lease")
        gate.release()
        first.join()
        #expect(shared.statistics.count(.populateStored) == 1)
        #expect(shared.statistics.count(.populateLost) == 1, "the first reader's lease was gone")
        #expect(backends.cachedVersion(profile.id, shared: shared) == 1)
    }

    @Test(arguments: Batching.allCases) func concurrentMissesShareOnePostgreSQLRead(_ batching: Batching) throws {
        let shared = Self.leaseFirst(.init(afterDatabaseRead: { _ in usleep(50_000) }))
        try CacheProtocolScenarios.expectAHerdSharesOneRead(InMemoryBackends.self, shared, batching)
    }
}
