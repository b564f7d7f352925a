import Foundation
import MemcachedClient
import Testing
import ProfileServiceTesting

@testable import ProfileService

/// Refresh (docs/design.md §2.3) in memory (ProfileServiceTesting): after a change this process did not write
/// through, no reader is served an older entry from memcached.
@Suite(.serialized) struct ProfileRepositoryRefreshTests {
    /// A profile cached at version 1 whose row is at version 2, committed behind the cache's back.
    private func staleEntry(
        _ backends: InMemoryBackends, _ shared: ProfileCacheShared
    ) throws -> (cached: Profile, committed: Profile) {
        let profile = try backends.seed()
        _ = try backends.repository(shared).read(id: profile.id)
        guard case .updated(let committed) = try backends.store.updateDisplayName(
            id: profile.id, to: "Behind the cache", expectedVersion: 1)
        else { throw TestFailure("update failed") }
        #expect(backends.cachedVersion(profile.id, shared: shared) == 1)
        return (profile, committed)
    }

    @Test func aKnownRowReplacesAnOlderEntry() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let (_, committed) = try staleEntry(backends, shared)
        let repository = backends.repository(shared)

        #expect(repository.refresh(after: .changed(id: committed.id, version: 2, row: committed)) == .stored)
        let read = try #require(try repository.read(id: committed.id))
        #expect(read.cacheOutcome == .hit)
        #expect(read.json == committed.json, "the entry is the committed row byte for byte")
        #expect(repository.refresh(after: .changed(id: committed.id, version: 2, row: committed)) == .current)
        #expect(repository.refresh(after: .changed(id: committed.id, version: 1, row: nil)) == .current)
    }

    @Test func aVersionAloneInvalidatesAnOlderEntry() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let (_, committed) = try staleEntry(backends, shared)
        let repository = backends.repository(shared)

        #expect(repository.refresh(after: .changed(id: committed.id, version: 2, row: nil)) == .invalidated)
        #expect(backends.cachedVersion(committed.id, shared: shared) == nil)
        #expect(repository.refresh(after: .changed(id: committed.id, version: 2, row: nil)) == .absent)
        #expect(try repository.read(id: committed.id)?.version == 2)
    }

    @Test func aLeaseIsInvalidatedSoItsReaderCannotLandAnOlderRow() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let key = shared.configuration.key(for: profile.id)
        #expect(backends.cache.add(key, value: CacheEntry.encodeLease(token: 7), flags: 0, expiration: 2) == .stored)

        let outcome = backends.repository(shared).refresh(after: .changed(id: profile.id, version: 1, row: profile))
        #expect(outcome == .invalidated)
        guard case .miss = backends.cache.get(key) else {
            Issue.record("the lease survived")
            return
        }
    }

    @Test func aDeletedProfileLeavesNoEntry() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        _ = try backends.repository(shared).read(id: profile.id)
        #expect(backends.repository(shared).refresh(after: .deleted(id: profile.id)) == .invalidated)
        #expect(backends.cachedVersion(profile.id, shared: shared) == nil)
    }

    @Test func aConflictRefreshesTheEntryToTheCurrentRow() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let (cached, committed) = try staleEntry(backends, shared)

        let outcome = try backends.repository(shared).updateDisplayName(
            id: cached.id, to: "Lost race", expectedVersion: 1)
        #expect(outcome == .versionMismatch(current: committed))
        #expect(backends.cachedVersion(cached.id, shared: shared) == 2, "the 409 repaired the stale entry")
    }

    @Test func anUpdateWhoseOutcomeIsUnknownInvalidatesTheEntry() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        _ = try backends.repository(shared).read(id: profile.id)
        // The connection breaks after COMMIT: the row changed, the writer hears "unavailable".
        let repository = ProfileRepository(
            store: CommitThenFailStore(backends.store), cache: backends.cache, shared: shared,
            logger: InMemoryBackends.logger)

        #expect(throws: ProfileStoreError.unavailable) {
            try repository.updateDisplayName(id: profile.id, to: "Unknown", expectedVersion: 1)
        }
        #expect(backends.cachedVersion(profile.id, shared: shared) == nil, "version 1 must not be served on")
        #expect(try backends.repository(shared).read(id: profile.id)?.version == 2)
    }
}

/// A store whose updates commit and then report the connection lost (an injected fault).
private final class CommitThenFailStore: ForwardingProfileStore {
    override func update(id: Int64, changes: ProfileChanges, expectedVersion: Int32?) throws(ProfileStoreError)
        -> ProfileUpdateOutcome
    {
        _ = try base.update(id: id, changes: changes, expectedVersion: expectedVersion)
        throw .unavailable
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
