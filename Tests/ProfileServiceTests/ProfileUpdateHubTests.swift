import Foundation
import ProfileServiceTesting
import Synchronization
import Testing
import TestSupport

@testable import HTTPServer
@testable import ProfileService

/// The hub on the in-memory backends (memcached's and PostgreSQL's semantics, no server): what it
/// fetches, how often, and how it retries. The end-to-end suites run it on the real servers.
@Suite struct ProfileUpdateHubTests {
    typealias Backends = InMemoryBackends

    /// A worker on the shared in-memory cluster and database, `store` in place of the database's
    /// own when given (an injected fault).
    static func worker(shared: ProfileCacheShared, store: (any ProfileStore)? = nil) -> ProfileWorker {
        ProfileWorker(
            store: store ?? Backends.database.store(), cache: Backends.cluster.client(), shared: shared,
            logger: Backends.logger)
    }

    static func startedHub(_ streams: EventStreams) -> ProfileUpdateHub {
        let hub = ProfileUpdateHub(streams: streams, logger: Backends.logger)
        let shared = ProfileCacheShared()
        hub.startFetching(threads: 2) { worker(shared: shared) }
        return hub
    }

    @Test func oneFetchPerIdAndVersionAndNoneForIdsNobodyFollows() throws {
        let backends = try Backends()
        let profile = try backends.seed()
        let streams = EventStreams()
        let hub = Self.startedHub(streams)
        defer { hub.stop() }

        hub.publish(id: profile.id, version: 1)
        #expect(hub.fetches.load(ordering: .relaxed) == 0, "nobody follows the id here")

        streams.retain(topic: profile.id)
        defer { streams.release(topic: profile.id) }
        guard case .updated(let updated) = try backends.store.updateDisplayName(
            id: profile.id, to: "Notified", expectedVersion: 1)
        else { Issue.record("update failed"); return }
        for _ in 0..<20 { hub.publish(id: profile.id, version: updated.version) }  // repeated notifications
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(5)) { streams.latestPosition(topic: profile.id) == 2 })
        hub.publish(id: profile.id, version: 2)  // the feed's notification after the local fast path
        #expect(hub.fetches.load(ordering: .relaxed) == 1)
        var events: [EventStreams.Event] = []
        streams.takeEvents(loop: 0, into: &events)
        #expect(events.count == 1)
        let text = String(decoding: events.first?.bytes ?? [], as: UTF8.self)
        #expect(text == "event: profile\nid: 2\ndata: \(String(decoding: updated.ownerJSON, as: UTF8.self))\n\n")
    }

    /// Failures still to inject, shared by the test and the fetch thread.
    final class Failures: Sendable {
        let left: Atomic<Int>
        init(_ count: Int) { left = Atomic(count) }
    }

    /// A store whose reads fail while `failures` last (an injected fault), else the in-memory one.
    final class FlakyStore: ForwardingProfileStore {
        let failures: Failures
        init(failures: Failures) {
            self.failures = failures
            super.init(Backends.database.store())
        }
        override func profile(id: Int64) throws(ProfileStoreError) -> Profile? {
            if failures.left.subtract(1, ordering: .relaxed).newValue >= 0 { throw .unavailable }
            return try base.profile(id: id)
        }
    }

    /// A failed fetch is retried with backoff and delivers the highest version asked for, also one
    /// published while it was failing (issue 25: before, the event was dropped).
    @Test func aFailedFetchIsRetriedAndDeliversTheLatestVersion() throws {
        let backends = try Backends()
        let profile = try backends.seed()
        let shared = ProfileCacheShared()
        _ = try backends.repository(shared).read(id: profile.id)  // memcached holds version 1
        let streams = EventStreams()
        let hub = ProfileUpdateHub(streams: streams, logger: Backends.logger)
        defer { hub.stop() }
        let failures = Failures(3)
        hub.startFetching(threads: 1) { Self.worker(shared: shared, store: FlakyStore(failures: failures)) }
        streams.retain(topic: profile.id)
        defer { streams.release(topic: profile.id) }

        // Committed behind memcached's back: the fetch with min_version 2 must read PostgreSQL, and fails.
        _ = try backends.store.updateDisplayName(id: profile.id, to: "Second", expectedVersion: 1)
        hub.publish(id: profile.id, version: 2)
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(1)) { failures.left.load(ordering: .relaxed) <= 1 })
        // A newer version is published while the fetch is failing: it is kept, not lost.
        _ = try backends.store.updateDisplayName(id: profile.id, to: "Third", expectedVersion: 2)
        hub.publish(id: profile.id, version: 3)
        #expect(
            Eventually.wait(timeout: .seconds(5), interval: .milliseconds(5)) { streams.latestPosition(topic: profile.id) == 3 },
            "the stream reaches the latest version once the store answers")
        #expect(failures.left.load(ordering: .relaxed) < 0, "every injected failure was met, and retried")
    }

    @Test func aResynchronisationReadsPostgreSQLPastAStaleCacheEntry() throws {
        let backends = try Backends()
        let profile = try backends.seed()
        let shared = ProfileCacheShared()
        _ = try backends.repository(shared).read(id: profile.id)  // memcached holds version 1
        let streams = EventStreams()
        let hub = Self.startedHub(streams)
        defer { hub.stop() }
        streams.retain(topic: profile.id)
        defer { streams.release(topic: profile.id) }
        // Committed while no notification could arrive: memcached still says version 1.
        _ = try backends.store.updateDisplayName(id: profile.id, to: "Missed", expectedVersion: 1)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 1)
        hub.resynchronize()
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(5)) { streams.latestPosition(topic: profile.id) == 2 })
    }

    /// A deletion is confirmed in PostgreSQL and placed at the deleted row's last version: the
    /// lists' streams get a `deleted` event, a fetch of that version finishing later cannot bring
    /// the profile back, and the profile created again (above the tombstone) goes out.
    @Test func aDeletionIsPlacedAtTheDeletedRowsLastVersion() throws {
        let backends = try Backends()
        let profile = try backends.seed()
        let streams = EventStreams()
        let hub = Self.startedHub(streams)
        defer { hub.stop() }
        streams.retain(topic: profile.id)
        defer { streams.release(topic: profile.id) }
        _ = try backends.store.updateDisplayName(id: profile.id, to: "Before the delete", expectedVersion: 1)

        Backends.database.delete(id: profile.id)  // DELETE at a psql prompt: the tombstone keeps version 2
        hub.publish(id: profile.id, version: 0)
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(5)) { streams.latestPosition(topic: profile.id) == 2 })
        var events: [EventStreams.Event] = []
        streams.takeEvents(loop: 0, into: &events)
        #expect(events.map(\.closesStreams) == [true])
        #expect(String(decoding: events.first?.bytes ?? [], as: UTF8.self) == "event: deleted\ndata: {\"id\":\(profile.id),\"version\":2}\n\n")

        // The fetch of version 2 that a notification started before the delete, finishing now:
        #expect(!streams.publish(topic: profile.id, position: 2, bytes: []), "a deleted version does not come back")

        let again = try backends.store.create(id: profile.id, username: profile.username, displayName: "Again")
        #expect(again.version == 3)
        hub.publish(id: profile.id, version: again.version)
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(5)) { streams.latestPosition(topic: profile.id) == 3 })
    }
}
