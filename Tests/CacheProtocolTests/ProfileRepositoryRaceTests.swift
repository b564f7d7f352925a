import Foundation
import MemcachedClient
import Synchronization
import Testing
import ProfileServiceTesting
import TestSupport

@testable import ProfileService

/// The stale-set race of docs/design.md §2.1, replayed deterministically: a reader is held between its
/// PostgreSQL read and its populate while a writer commits and writes through.
@Suite(.serialized) struct ProfileRepositoryRaceTests {
    /// Runs a reader of `profile` up to its pause, then `whilePaused`, then lets it finish and
    /// returns what the reader answered.
    private func withPausedReader(
        of profile: Profile, shared: ProfileCacheShared, gate: ReaderGate, whilePaused: () -> Void
    ) -> ProfileRepository.Representation? {
        let result = Mutex<ProfileRepository.Representation?>(nil)
        gate.arm(profile.id)
        let reader = TestThread {
            let backends = try! InMemoryBackends()
            defer { withExtendedLifetime(backends) {} }
            let read = try? backends.repository(shared).read(id: profile.id)
            result.withLock { $0 = read }
        }
        gate.waitUntilPaused()
        whilePaused()
        gate.release()
        reader.join()
        return result.withLock { $0 }
    }

    @Test func aLateRecordOfAbsenceDoesNotHideACreation() throws {
        let gate = ReaderGate()
        let shared = ProfileCacheShared(hooks: .init(afterDatabaseRead: gate.pause))
        let backends = try InMemoryBackends()
        let id = Int64.random(in: 9_100_000_000_000_000...9_200_000_000_000_000)
        let writer = backends.repository(shared)
        let absent = Profile(id: id, username: "x", displayName: "x", version: 1, updatedAt: "")

        // The reader found no row and is held before it records the absence; the profile is
        // created and written through meanwhile.
        let readerSaw = withPausedReader(of: absent, shared: shared, gate: gate) {
            let created = try? writer.create(id: id, username: "r\(id % 1_000_000_000)", displayName: "Created")
            #expect(created?.version == 1)
            #expect(backends.cachedVersion(id, shared: shared) == 1, "the write-through replaced the lease")
        }
        #expect(readerSaw == nil, "the reader began before the creation: absent is a fair answer")
        #expect(backends.cachedVersion(id, shared: shared) == 1, "the late record of absence must not land")
        #expect(shared.statistics.count(.populateLost) == 1)
        #expect(try writer.read(id: id)?.version == 1)
    }

    @Test func lateReaderDoesNotFillAnEvictedSlot() throws {
        let gate = ReaderGate()
        let shared = ProfileCacheShared(hooks: .init(afterDatabaseRead: gate.pause))
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let writer = backends.repository(shared)

        _ = withPausedReader(of: profile, shared: shared, gate: gate) {
            _ = try? writer.updateDisplayName(id: profile.id, to: "Writer", expectedVersion: 1)
            #expect(backends.cachedVersion(profile.id, shared: shared) == 2)
            // Evicted between the writer's write-through and the reader's populate.
            _ = backends.cache.delete(shared.configuration.key(for: profile.id))
        }
        #expect(backends.cachedVersion(profile.id, shared: shared) == nil, "version 1 must not land in the empty slot")
        #expect(shared.statistics.count(.populateLost) == 1)
        // The next read repopulates with the current row.
        #expect(try backends.repository(shared).read(id: profile.id)?.version == 2)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 2)
    }

    @Test func writeThroughThatCannotStoreDeletesAndTheLateReaderLoses() throws {
        let gate = ReaderGate()
        let shared = ProfileCacheShared(hooks: .init(afterDatabaseRead: gate.pause))
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let writer = backends.repository(shared, cache: ConflictingCache(backends.cache))

        _ = withPausedReader(of: profile, shared: shared, gate: gate) {
            _ = try? writer.updateDisplayName(id: profile.id, to: "Writer", expectedVersion: 1)
        }
        #expect(shared.statistics.count(.writeThroughDeleted) == 1)
        #expect(shared.statistics.count(.writeThroughCASConflict) == shared.configuration.writeThroughAttempts)
        #expect(backends.cachedVersion(profile.id, shared: shared) == nil)
        #expect(shared.statistics.count(.populateLost) == 1)
    }

    @Test func guardedWriteThroughNeverMovesTheCacheBackwards() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let repository = backends.repository(shared)
        _ = try repository.read(id: profile.id)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 1)
        guard case .updated(let newer) = try backends.store.updateDisplayName(
            id: profile.id, to: "Two", expectedVersion: 1)
        else {
            Issue.record("update failed")
            return
        }
        #expect(repository.writeThrough(newer) == .stored)
        #expect(repository.writeThrough(profile) == .skippedNewer)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 2)
    }

    /// The race the soak test found in "absent → add": a slow writer of version 2 finds the slot
    /// empty because version 3 was written through and then evicted.
    @Test func slowWriterDoesNotRefillAnEvictedSlotWithItsOlderVersion() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let repository = backends.repository(shared)
        guard case .updated(let slow) = try backends.store.updateDisplayName(
            id: profile.id, to: "Slow", expectedVersion: 1)
        else {
            Issue.record("update failed")
            return
        }
        _ = try repository.updateDisplayName(id: profile.id, to: "Fast", expectedVersion: 2)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 3)
        _ = backends.cache.delete(shared.configuration.key(for: profile.id))  // evicted

        #expect(repository.writeThrough(slow) == .stored)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 3, "refreshed from PostgreSQL, not version 2")
    }
}

