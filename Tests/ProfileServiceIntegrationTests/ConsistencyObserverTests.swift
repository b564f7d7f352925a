import Foundation
import MemcachedClient
import Testing
import TestSupport

@testable import ProfileService

/// The service measures its own consistency (issue 21; docs/design.md §3.8): the observer on the
/// real change feed, PostgreSQL and memcached.
@Suite(.serialized, .requires(.postgres, .memcached)) struct ConsistencyObserverTests {
    typealias Harness = ChangeFeedTests.Harness

    private func feed(_ harness: Harness) throws -> ChangeFeed {
        try harness.startFeed {
            $0.consistencySampleRate = 1
            $0.consistencyCheckDelay = .milliseconds(800)
        }
    }

    @Test func changesRepairedByTheFeedAreCountedConsistent() throws {
        let harness = try Harness()
        let feed = try feed(harness)
        #expect(harness.waitUntilActive(feed))
        let profiles = try (0..<5).map { _ in try harness.cachedProfile() }
        for profile in profiles { try harness.updateInSQL(profile.id, displayName: "Checked") }
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(20)) {
            feed.consistency.count(.consistent) >= profiles.count
        })
        #expect(feed.consistency.count(.violation) == 0)
    }

    @Test func aStaleEntryPlantedBehindTheServicesBackIsCountedAndRepaired() throws {
        let harness = try Harness()
        let feed = try feed(harness)
        #expect(harness.waitUntilActive(feed))
        let profile = try harness.cachedProfile()
        try harness.updateInSQL(profile.id, displayName: "Newer")
        #expect(Eventually.wait(interval: .milliseconds(2)) { harness.backends.cachedVersion(profile.id, shared: harness.shared) == 2 })
        // Within the check's delay, memcached is set back to version 1 behind the service's back.
        let key = harness.shared.configuration.key(for: profile.id)
        #expect(harness.backends.cache.set(key, value: CacheEntry.encode(profile)) == .stored)

        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(20)) { feed.consistency.count(.violation) == 1 })
        // Counted before it is repaired (the observer logs and refreshes after recording): wait for the repair.
        #expect(
            Eventually.wait(timeout: .seconds(5), interval: .milliseconds(2)) {
                harness.backends.cachedVersion(profile.id, shared: harness.shared) != 1
            }, "the violation was repaired")
    }
}
