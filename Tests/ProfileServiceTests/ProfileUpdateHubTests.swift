import Foundation
import MemcachedClient
import PostgresClient
import Synchronization
import Testing
import TestSupport

@testable import HTTPServer
@testable import ProfileService

/// The hub against the real PostgreSQL and memcached: what it fetches, and how often.
@Suite(.serialized) struct ProfileUpdateHubTests {
    static func startedHub(_ streams: EventStreams) throws -> ProfileUpdateHub {
        let postgres = try PostgresConfiguration(url: TestEnvironment.databaseURL)
        let memcached = try MemcachedConfiguration(servers: TestEnvironment.memcachedServerList)
        let hub = ProfileUpdateHub(streams: streams, logger: IntegrationBackends.logger)
        let health = PostgresServerHealth()
        hub.startFetching(threads: 2) {
            try ProfileWorker.connecting(
                postgres: postgres, databaseHealth: health, memcached: memcached, shared: ProfileCacheShared(),
                logger: IntegrationBackends.logger)
        }
        return hub
    }

    @Test func oneFetchPerIdAndVersionAndNoneForIdsNobodyFollows() throws {
        let backends = try IntegrationBackends()
        let profile = try backends.seed()
        let streams = EventStreams()
        let hub = try Self.startedHub(streams)
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
        streams.takeEvents(into: &events)
        #expect(events.count == 1)
        let text = String(decoding: events.first?.bytes ?? [], as: UTF8.self)
        #expect(text == "event: profile\nid: 2\ndata: \(String(decoding: updated.jsonBytes, as: UTF8.self))\n\n")
    }

    @Test func aResynchronisationReadsPostgreSQLPastAStaleCacheEntry() throws {
        let backends = try IntegrationBackends()
        let profile = try backends.seed()
        let shared = ProfileCacheShared()
        _ = try backends.repository(shared).read(id: profile.id)  // memcached holds version 1
        let streams = EventStreams()
        let hub = try Self.startedHub(streams)
        defer { hub.stop() }
        streams.retain(topic: profile.id)
        defer { streams.release(topic: profile.id) }
        // Committed while no notification could arrive: memcached still says version 1.
        _ = try backends.store.updateDisplayName(id: profile.id, to: "Missed", expectedVersion: 1)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 1)
        hub.resynchronize()
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(5)) { streams.latestPosition(topic: profile.id) == 2 })
    }
}
