import Foundation
import MemcachedClient
import Synchronization
import Testing
import ProfileServiceTesting

@testable import ProfileService

/// Counts the round trips a repository makes, forwarding each to the cluster.
final class CountingCache: CacheClient {
    let base: any CacheClient
    private(set) var singleGets = 0
    /// The keys of each multi-get.
    private(set) var multiGetKeys: [[String]] = []
    var multiGets: Int { multiGetKeys.count }
    /// Pipelined stores with their read-back (leases, populates of loads), each one round trip.
    private(set) var pipelinedStores = 0
    /// `add`, `addAndGet` and `cas` of one key, each a round trip of its own.
    private(set) var singleStores = 0

    init(_ base: any CacheClient) { self.base = base }

    func get(_ key: String) -> MemcachedGetResult {
        singleGets += 1
        return base.get(key)
    }
    func get(many keys: [String]) -> Result<[String: MemcachedItem], MemcachedError> {
        multiGetKeys.append(keys)
        return base.get(many: keys)
    }
    func add(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        singleStores += 1
        return base.add(key, value: value, flags: flags, expiration: expiration)
    }
    func addAndGet(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedGetResult {
        singleStores += 1
        return base.addAndGet(key, value: value, flags: flags, expiration: expiration)
    }
    func cas(_ key: String, value: [UInt8], cas: UInt64, flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        singleStores += 1
        return base.cas(key, value: value, cas: cas, flags: flags, expiration: expiration)
    }
    func addAndGet(many stores: [MemcachedStore], flags: UInt32) -> Result<[String: MemcachedItem], MemcachedError> {
        pipelinedStores += 1
        return base.addAndGet(many: stores, flags: flags)
    }
    func casAndGet(many stores: [MemcachedStore], flags: UInt32) -> Result<[String: MemcachedItem], MemcachedError> {
        pipelinedStores += 1
        return base.casAndGet(many: stores, flags: flags)
    }
    func delete(_ key: String) -> MemcachedDeleteResult { base.delete(key) }
    func server(forKey key: String) -> MemcachedServer? { base.server(forKey: key) }
    func flush(server: MemcachedServer) -> MemcachedError? { base.flush(server: server) }
}

/// Batched reads (docs/design.md §6) and batched refreshes in memory (ProfileServiceTesting): one multi-get
/// instead of one round trip per id, and never an answer older than the unbatched path gives.
@Suite(.serialized) struct ProfileRepositoryBatchTests {
    /// `count` profiles at version 1, each cached.
    private func cachedProfiles(_ count: Int, _ backends: InMemoryBackends, _ shared: ProfileCacheShared) throws
        -> [Profile]
    {
        let profiles = try (0..<count).map { _ in try backends.seed() }
        let warm = backends.repository(shared)
        for profile in profiles { _ = try warm.read(id: profile.id) }
        for profile in profiles { try #require(backends.cachedVersion(profile.id, shared: shared) == 1) }
        return profiles
    }

    @Test func aBatchOfHitsCostsOneMultiGet() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profiles = try cachedProfiles(5, backends, shared)
        let missing = Int64.random(in: 9_100_000_000_000_000...9_200_000_000_000_000)
        let counting = CountingCache(backends.cache)
        let repository = backends.repository(shared, cache: counting)

        let entries = repository.prefetch(ids: profiles.map(\.id) + [missing])
        let reads = try profiles.map { profile in
            try repository.read(id: profile.id, minVersion: nil, batched: entries[profile.id].map { .prefetched($0) })
        }
        #expect(reads.map { $0?.cacheOutcome } == Array(repeating: ProfileRepository.CacheOutcome.hit, count: 5))
        #expect(reads.map { $0?.json } == profiles.map(\.json))
        #expect(counting.multiGets == 1)
        #expect(counting.singleGets == 0, "every first lookup came from the multi-get")
    }

    @Test func theRepositoryKeepsNoPrefetchedEntryAfterAWrite() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profiles = try cachedProfiles(2, backends, shared)
        let repository = backends.repository(shared)
        let written = profiles[0]

        let entries = repository.prefetch(ids: profiles.map(\.id))
        #expect(entries.count == 2)
        _ = try repository.updateDisplayName(id: written.id, to: "Written in the batch", expectedVersion: 1)
        let read = try repository.read(id: written.id)
        #expect(read?.version == 2, "a read not handed the batch's entry sees the write, not the prefetched version 1")
    }

    @Test func aPrefetchedEntryServesOnlyTheReadItIsHandedTo() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profiles = try cachedProfiles(2, backends, shared)
        let counting = CountingCache(backends.cache)
        let repository = backends.repository(shared, cache: counting)

        let entries = repository.prefetch(ids: profiles.map(\.id))
        _ = try repository.read(id: profiles[0].id, minVersion: nil, batched: entries[profiles[0].id].map { .prefetched($0) })
        #expect(counting.singleGets == 0, "handed its entry, the read looks no more")
        _ = try repository.read(id: profiles[0].id)
        #expect(counting.singleGets == 1, "a read not handed it looks again")
        // Changed after the batch: a read then must not be answered by the batch's lookup.
        guard case .updated(let committed) = try backends.store.updateDisplayName(
            id: profiles[1].id, to: "After the batch", expectedVersion: 1)
        else { throw TestFailure("update failed") }
        #expect(repository.refresh(after: .changed(id: committed.id, version: 2, row: committed)) == .stored)
        #expect(try repository.read(id: profiles[1].id)?.version == 2)
        #expect(counting.singleGets == 3)
    }

    @Test func nothingIsPrefetchedWhileReadsSendTheirLeaseFirst() throws {
        let shared = ProfileRepositoryLeaseFirstTests.leaseFirst()
        let backends = try InMemoryBackends()
        let profiles = try cachedProfiles(3, backends, shared)
        let counting = CountingCache(backends.cache)
        let repository = backends.repository(shared, cache: counting)
        #expect(!repository.prefersBatches)

        let entries = repository.prefetch(ids: profiles.map(\.id))
        #expect(entries.isEmpty)
        let versions = try profiles.map { try repository.read(id: $0.id)?.version }
        #expect(versions == [1, 1, 1])
        #expect(counting.multiGets == 0)
    }

    @Test func aBatchedRefreshEndsLikeSingleRefreshesInOneRoundTrip() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profiles = try cachedProfiles(3, backends, shared)
        // [0] stale (row committed behind the cache), [1] current, [2] uncached, [3] a lease.
        guard case .updated(let committed) = try backends.store.updateDisplayName(
            id: profiles[0].id, to: "Behind the cache", expectedVersion: 1)
        else { throw TestFailure("update failed") }
        _ = backends.cache.delete(shared.configuration.key(for: profiles[2].id))
        let leased = try backends.seed()
        let leaseKey = shared.configuration.key(for: leased.id)
        #expect(backends.cache.add(leaseKey, value: CacheEntry.encodeLease(token: 9), flags: 0, expiration: 2) == .stored)

        let counting = CountingCache(backends.cache)
        let repository = backends.repository(shared, cache: counting)
        let outcomes = repository.refresh(after: [
            .changed(id: committed.id, version: 2, row: committed),
            .changed(id: profiles[1].id, version: 1, row: profiles[1]),
            .changed(id: profiles[2].id, version: 1, row: profiles[2]),
            .changed(id: leased.id, version: 1, row: leased),
        ])
        #expect(outcomes == [.stored, .current, .absent, .invalidated])
        #expect(counting.multiGets == 1)
        #expect(counting.singleGets == 0)
        #expect(backends.cachedVersion(committed.id, shared: shared) == 2)
        #expect(backends.cache.get(leaseKey) == .miss)
    }
}

/// When a worker takes requests in batches: only while profile reads dominate its recent requests.
@Suite struct BatchPolicyTests {
    @Test func followsTheShareOfRecentProfileReads() {
        var policy = BatchPolicy()
        #expect(policy.readsDominate, "a new worker batches")
        for _ in 0..<16 { policy.record(profileRead: false) }
        #expect(!policy.readsDominate, "mostly writes: one request at a time")
        for _ in 0..<16 { policy.record(profileRead: true) }
        #expect(policy.readsDominate)
        for index in 0..<100 { policy.record(profileRead: index % 10 != 0) }
        #expect(policy.readsDominate, "a 90/10 mix still batches its reads")
    }
}
