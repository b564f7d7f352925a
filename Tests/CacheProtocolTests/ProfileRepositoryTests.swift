import Foundation
import MemcachedClient
import Synchronization
import Testing
import ProfileServiceTesting
import TestSupport

@testable import ProfileService

@Suite(.serialized) struct ProfileRepositoryTests {
    @Test func missPopulatesUnderALeaseThenHits() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let repository = backends.repository(shared)

        let first = try #require(try repository.read(id: profile.id))
        #expect(first.cacheOutcome == .miss)
        #expect(first.json == profile.json)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 1)
        let second = try #require(try repository.read(id: profile.id))
        #expect(second.cacheOutcome == .hit)
        #expect(second.json == profile.json)
        #expect(shared.statistics.count(.databaseRead) == 1)
        #expect(shared.statistics.count(.populateStored) == 1)
    }

    @Test func absenceIsCachedUntilACreationReplacesIt() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let id = Int64.random(in: 9_100_000_000_000_000...9_200_000_000_000_000)
        let repository = backends.repository(shared)
        #expect(try repository.read(id: id) == nil)
        guard case .hit(let item) = backends.cache.get(shared.configuration.key(for: id)) else {
            Issue.record("no record of the absence was left")
            return
        }
        #expect(CacheEntry(decoding: item.value, shape: ProfileFieldCatalog.standard.shape) == .absent)
        for _ in 0..<5 { #expect(try repository.read(id: id) == nil) }
        #expect(shared.statistics.count(.databaseRead) == 1, "absence is read from PostgreSQL once")
        #expect(shared.statistics.count(.absentHit) == 5)
        // A floor means the client knows of a version: PostgreSQL is asked, past the record.
        #expect(try repository.read(id: id, minVersion: 1) == nil)
        #expect(shared.statistics.count(.databaseRead) == 2)

        let created = try repository.create(id: id, username: "a\(id % 1_000_000_000)", displayName: "Now here")
        #expect(backends.cachedVersion(id, shared: shared) == created.version, "the write-through replaced it")
        let read = try #require(try repository.read(id: id))
        #expect(read.cacheOutcome == .hit)
        #expect(read.version == created.version)
    }

    @Test func theChangeFeedsRepairReplacesARecordedAbsence() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let id = Int64.random(in: 9_100_000_000_000_000...9_200_000_000_000_000)
        let repository = backends.repository(shared)
        #expect(try repository.read(id: id) == nil)
        // Inserted behind the service's back, then repaired as the feed would.
        let row = try backends.store.create(id: id, username: "f\(id % 1_000_000_000)", displayName: "Inserted")
        #expect(try repository.read(id: id) == nil, "until the repair, the record answers")
        #expect(repository.refresh(after: .changed(id: id, version: row.version, row: row)) == .stored)
        #expect(try repository.read(id: id)?.version == row.version)
        // Without the row in hand, the record is removed instead, and the next reader populates.
        #expect(repository.refresh(after: .deleted(id: id)) == .invalidated)
    }

    @Test func minVersionBypassesAStaleEntryAndRepairsIt() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let repository = backends.repository(shared)
        guard case .updated(let updated) = try backends.store.updateDisplayName(
            id: profile.id, to: "New", expectedVersion: 1)
        else {
            Issue.record("update failed")
            return
        }
        // memcached holds version 1 behind the service's back (a stale entry).
        _ = backends.cache.set(shared.configuration.key(for: profile.id), value: CacheEntry.encode(profile))

        #expect(try repository.read(id: profile.id)?.version == 1, "without a token, the stale entry is served")
        let fresh = try #require(try repository.read(id: profile.id, minVersion: 2))
        #expect(fresh.version == 2)
        #expect(fresh.cacheOutcome == .bypass)
        #expect(fresh.json == updated.json)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 2, "the bypass repaired the entry")
        #expect(try repository.read(id: profile.id)?.cacheOutcome == .hit)
    }

    @Test func undecodableEntryIsAMissAndIsReplaced() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        _ = backends.cache.set(shared.configuration.key(for: profile.id), value: Array(#"{"legacy":true}"#.utf8))
        let read = try #require(try backends.repository(shared).read(id: profile.id))
        #expect(read.cacheOutcome == .miss)
        #expect(read.version == 1)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 1)
    }

}
