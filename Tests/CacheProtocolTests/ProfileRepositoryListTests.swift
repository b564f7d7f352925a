import MemcachedClient
import ProfileServiceTesting
import Synchronization
import Testing
import TestSupport

@testable import ProfileService

/// A list read (docs/design.md §2.7): one multi-get for every member, then each member by the
/// rules of a single read — misses under their own lease, floors read past older entries.
@Suite struct ProfileRepositoryListTests {
    /// Counts lookups: single gets, and multi-gets with their keys.
    final class CountingCache: CacheClient {
        let base: any CacheClient
        var singleGets = 0
        var multiGets: [[String]] = []

        init(_ base: any CacheClient) { self.base = base }

        func get(_ key: String) -> MemcachedGetResult {
            singleGets += 1
            return base.get(key)
        }
        func get(many keys: [String]) -> Result<[String: MemcachedItem], MemcachedError> {
            multiGets.append(keys)
            return base.get(many: keys)
        }
        func add(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedStoreResult {
            base.add(key, value: value, flags: flags, expiration: expiration)
        }
        func addAndGet(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedGetResult {
            base.addAndGet(key, value: value, flags: flags, expiration: expiration)
        }
        func cas(_ key: String, value: [UInt8], cas: UInt64, flags: UInt32, expiration: Int) -> MemcachedStoreResult {
            base.cas(key, value: value, cas: cas, flags: flags, expiration: expiration)
        }
        func delete(_ key: String) -> MemcachedDeleteResult { base.delete(key) }
        func server(forKey key: String) -> MemcachedServer? { base.server(forKey: key) }
        func flush(server: MemcachedServer) -> MemcachedError? { base.flush(server: server) }
    }

    @Test func cachedMembersAndRecordedAbsencesCostOneMultiGet() throws {
        let backends = try InMemoryBackends()
        let shared = ProfileCacheShared()
        let profiles = try (0..<20).map { _ in try backends.seed() }
        let absent = Int64.random(in: 9_300_000_000_000_000...9_400_000_000_000_000)
        let warm = backends.repository(shared)
        for profile in profiles { _ = try warm.read(id: profile.id) }
        #expect(try warm.read(id: absent) == nil)  // its absence is recorded

        let counting = CountingCache(backends.cache)
        let repository = backends.repository(shared, cache: counting)
        let list = ProfileListRequest(members: profiles.map { .init(id: $0.id) } + [.init(id: absent)])
        let answers = try repository.read(list)
        #expect(answers.map { $0?.version } == profiles.map { _ in 1 } + [nil])
        #expect(answers.compactMap { $0?.cacheOutcome }.allSatisfy { $0 == .hit })
        #expect(counting.multiGets.count == 1)
        #expect(counting.multiGets.first?.count == 21)
        #expect(counting.singleGets == 0, "no member looked up again")
    }

    @Test func missesArePopulatedAndFloorsReadPastOlderEntries() throws {
        let backends = try InMemoryBackends()
        let shared = ProfileCacheShared()
        let cached = try backends.seed()
        let cold = try backends.seed()
        let repository = backends.repository(shared)
        _ = try repository.read(id: cached.id)
        // Committed behind memcached's back: the entry still says version 1.
        _ = try backends.store.updateDisplayName(id: cached.id, to: "Newer", expectedVersion: 1)

        let answers = try repository.read(
            ProfileListRequest(members: [.init(id: cached.id, floor: 2), .init(id: cold.id)]))
        #expect(answers.map { $0?.version } == [2, 1])
        #expect(backends.cachedVersion(cold.id, shared: shared) == 1, "the miss was populated under its lease")
        #expect(backends.cachedVersion(cached.id, shared: shared) == 2, "the floor's read brought the entry up")
        // Without the floor the older entry is a valid answer (the staleness every reader accepts).
        let unfloored = try repository.read(ProfileListRequest(members: [.init(id: cached.id)]))
        #expect(unfloored.first??.version == 2)
    }
}
