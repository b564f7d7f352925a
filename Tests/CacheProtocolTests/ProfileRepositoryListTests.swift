import MemcachedClient
import ProfileServiceTesting
import Synchronization
import Testing
import TestSupport

@testable import ProfileService

/// A list read (docs/design.md §2.7): one multi-get for every member, then each member by the
/// rules of a single read — misses under their own lease, floors read past older entries.
/// (`CountingCache` is ProfileRepositoryBatchTests'.)
@Suite struct ProfileRepositoryListTests {
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
        #expect(counting.multiGets == 1)
        #expect(counting.multiGetKeys.first?.count == 21)
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

    /// Counts the store's reads: one by id, or many in one query.
    final class CountingStore: ForwardingProfileStore {
        var singleReads = 0
        var manyReads: [[Int64]] = []
        override func profile(id: Int64) throws(ProfileStoreError) -> Profile? {
            singleReads += 1
            return try base.profile(id: id)
        }
        override func profiles(ids: [Int64]) throws(ProfileStoreError) -> [Int64: Profile] {
            manyReads.append(ids)
            return try base.profiles(ids: ids)
        }
    }

    @Test func aColdListIsOneQueryAndEveryMissIsPopulatedUnderItsLease() throws {
        let backends = try InMemoryBackends()
        let shared = ProfileCacheShared()
        let profiles = try (0..<20).map { _ in try backends.seed() }
        let absent = Int64.random(in: 9_500_000_000_000_000...9_600_000_000_000_000)
        let store = CountingStore(backends.store)
        let repository = ProfileRepository(store: store, cache: backends.cache, shared: shared, logger: InMemoryBackends.logger)

        let list = ProfileListRequest(members: profiles.map { .init(id: $0.id) } + [.init(id: absent)])
        let answers = try repository.read(list)
        #expect(answers.map { $0?.version } == profiles.map { _ in 1 } + [nil])
        #expect(store.manyReads.count == 1 && store.manyReads.first?.count == 21, "\(store.manyReads.map(\.count))")
        #expect(store.singleReads == 0)
        #expect(profiles.allSatisfy { backends.cachedVersion($0.id, shared: shared) == 1 })
        #expect(shared.statistics.count(.populateStored) == 21, "20 rows and the record of one absence")
        // Read again: every member from the one multi-get.
        #expect(try repository.read(list).compactMap { $0?.cacheOutcome } == profiles.map { _ in .hit })
        #expect(store.manyReads.count == 1 && store.singleReads == 0)
    }

    @Test func whileMissesAreCommonAColdListIsStillOneMultiGetAndOneQuery() throws {
        let backends = try InMemoryBackends()
        let shared = ProfileCacheShared()
        let store = CountingStore(backends.store)
        let counting = CountingCache(backends.cache)
        let repository = ProfileRepository(store: store, cache: counting, shared: shared, logger: InMemoryBackends.logger)
        let first = try (0..<20).map { _ in try backends.seed() }
        _ = try repository.read(ProfileListRequest(members: first.map { .init(id: $0.id) }))
        #expect(!repository.prefersBatches, "20 misses made this worker read lease-first")

        let second = try (0..<20).map { _ in try backends.seed() }
        let answers = try repository.read(ProfileListRequest(members: second.map { .init(id: $0.id) }))
        #expect(answers.map { $0?.version } == second.map { _ in 1 })
        #expect(counting.multiGets == 2 && store.manyReads.count == 2, "one multi-get and one query per list")
        #expect(counting.pipelinedStores == 4, "the leases in one round trip and the populates in one, per list")
        #expect(store.singleReads == 0 && counting.singleGets == 0 && counting.singleStores == 0)
    }

    @Test func theDatabaseDownFailsTheListAndLeavesNoLease() throws {
        let database = InMemoryDatabase()
        let backends = try InMemoryBackends(cluster: InMemoryCache(nodes: 2), database: database)
        let shared = ProfileCacheShared()
        let profiles = try (0..<3).map { _ in try backends.seed() }
        let repository = backends.repository(shared)
        database.setUnavailable(true)
        #expect(throws: ProfileStoreError.unavailable) {
            try repository.read(ProfileListRequest(members: profiles.map { .init(id: $0.id) }))
        }
        for profile in profiles {
            if case .hit = backends.cache.get(ProfileCacheEntries.key(for: profile.id)) {
                Issue.record("a lease was left for \(profile.id): readers would wait on it")
            }
        }
        database.setUnavailable(false)
        #expect(try repository.read(ProfileListRequest(members: profiles.map { .init(id: $0.id) })).map { $0?.version } == [1, 1, 1])
    }
}
