import Foundation
import Logging
import MemcachedClient
import ProfileServiceTesting
import Testing
import TestSupport

@testable import ProfileService

/// The consistency observer's confirmation (docs/design.md §3.8) against writes racing its two
/// reads: an entry replaced between its memcached read and its PostgreSQL read is no violation;
/// an entry that stays is one.
@Suite(.serialized) struct ConsistencyObserverRaceTests {
    /// Runs `hook` once, on the first row read: a write that commits while the observer confirms
    /// a suspect. Armed before the observer's thread starts, and used only on that thread.
    final class RacingStore: ForwardingProfileStore, @unchecked Sendable {
        var hook: (() -> Void)?

        override func profile(id: Int64) throws(ProfileStoreError) -> Profile? {
            if let run = hook {
                hook = nil
                run()
            }
            return try base.profile(id: id)
        }
    }

    private func observe(
        _ change: ProfileChange, store: RacingStore, backends: InMemoryBackends, shared: ProfileCacheShared,
        delay: Duration = .milliseconds(1)
    ) -> ConsistencyObserver {
        var logger = Logger(label: "observer-race")
        logger.logLevel = .critical
        let observer = ConsistencyObserver(sampleRate: 1, delay: delay, logger: logger)
        observer.start { [logger] in
            ProfileWorker(store: store, cache: InMemoryBackends.cluster.client(), shared: shared, logger: logger)
        }
        // The observer samples only once started: its thread may take a moment.
        Thread.sleep(forTimeInterval: 0.05)
        observer.observe([change])
        _ = Eventually.wait(timeout: .seconds(5), interval: .milliseconds(2)) {
            ConsistencyVerdict.Outcome.allCases.contains { observer.count($0) > 0 }
        }
        observer.stop()
        return observer
    }

    /// A profile deleted and created again through `writer`, whose write-through cached it.
    static func deletedAndCreatedAgain() throws -> (InMemoryBackends, ProfileCacheShared, ProfileRepository, Profile) {
        let backends = try InMemoryBackends()
        let shared = ProfileCacheShared()
        let writer = ProfileRepository(store: backends.store, cache: backends.cache, shared: shared, logger: Logger(label: "w"))
        let profile = try backends.seed()
        _ = try writer.delete(id: profile.id, expectedVersion: nil)
        let again = try writer.create(id: profile.id, username: "again\(profile.id % 1_000_000)", displayName: "Again")
        #expect(backends.cachedVersion(profile.id, shared: shared) == again.version)
        return (backends, shared, writer, again)
    }

    /// A profile deleted, created again and cached; while the observer confirms the deletion's
    /// sample, the profile changes again (a new entry): not a violation.
    @Test func aProfileCreatedAgainAndChangedDuringTheCheckIsNoViolation() throws {
        let (backends, shared, writer, again) = try Self.deletedAndCreatedAgain()
        let store = RacingStore(backends.store)
        store.hook = { _ = try? writer.updateDisplayName(id: again.id, to: "Later", expectedVersion: again.version) }
        let observer = observe(.deleted(id: again.id), store: store, backends: backends, shared: shared)
        #expect(observer.count(.violation) == 0)
        #expect(observer.count(.consistent) == 1)
    }

    /// A profile deleted and created again is cached; while the observer confirms the first
    /// deletion's sample, a second deletion commits and its writer's repair comes 20 ms later, as
    /// a write-through does: the entry was stale only within that repair — not a violation.
    /// (Before the second look, every soak with deleters counted such an instant as one.)
    @Test func aDeletionCommittedDuringTheCheckWhoseRepairFollowsIsNoViolation() throws {
        let (backends, shared, writer, again) = try Self.deletedAndCreatedAgain()
        let store = RacingStore(backends.store)
        // The deleting writer: used on its own thread only, once the hook hands it over.
        nonisolated(unsafe) let deleter = writer
        store.hook = {
            _ = try? backends.store.delete(id: again.id, expectedVersion: again.version)  // committed, not yet repaired
            Thread.detachNewThread {
                Thread.sleep(forTimeInterval: 0.02)
                deleter.refresh(after: .deleted(id: again.id))  // its own repair, 20 ms later
            }
        }
        let observer = observe(.deleted(id: again.id), store: store, backends: backends, shared: shared, delay: .milliseconds(300))
        #expect(observer.count(.violation) == 0)
        #expect(observer.count(.consistent) == 1)
    }

    /// The deleted profile's entry put back behind the service's back stays through the check: a
    /// violation (the check still catches what it is for).
    @Test func aDeletedProfilesEntryThatStaysIsAViolation() throws {
        let backends = try InMemoryBackends()
        let shared = ProfileCacheShared()
        let writer = ProfileRepository(store: backends.store, cache: backends.cache, shared: shared, logger: Logger(label: "w"))
        let profile = try backends.seed()
        _ = try writer.delete(id: profile.id, expectedVersion: nil)
        #expect(backends.cache.set(shared.configuration.key(for: profile.id), value: CacheEntry.encode(profile)) == .stored)
        let observer = observe(.deleted(id: profile.id), store: RacingStore(backends.store), backends: backends, shared: shared)
        #expect(observer.count(.violation) == 1)
    }
}
