import Foundation
import Testing
import TestSupport

@testable import ProfileClient

/// Streams asleep in backoff after the network failed them reconnect as soon as the network is
/// back — the app says so, or any request gets an answer — while a stream the service refused
/// keeps the wait it asked for. These tests sleep for real (a backoff of a minute that must not
/// be waited out).
@Suite(.timeLimit(.minutes(1))) struct NetworkWakeUpTests {
    static let id: Int64 = 42
    typealias Events = ControlledEventTransport

    /// A client whose streams wait a minute after a failure, and whose reads fail as the network
    /// does until `online` is set, then answer `fetched`.
    static func client(
        _ events: Events, online: Flag = Flag(),
        fetched: TransportResponse = FakeTransport.json(FakeTransport.profile(id, "Ada", version: 1))
    ) -> ProfileClient {
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.retry = RetryPolicy(maximumAttempts: 1)
        configuration.liveUpdates.initialDelay = .seconds(60)
        configuration.liveUpdates.maximumDelay = .seconds(60)
        let transport = FakeTransport { _, _ throws(TransportError) in
            guard online.isSet else { throw TransportError(kind: .offline, description: "offline") }
            return fetched
        }
        return ProfileClient(
            configuration: configuration, transport: transport, eventTransport: events, randomUnit: { 1 },
            sleep: { try await Task.sleep(for: $0) })
    }

    /// No new connection for `duration`: the stream still sleeps.
    static func staysAsleep(_ events: Events, connections: Int, for duration: Duration = .milliseconds(300)) async -> Bool {
        try? await Task.sleep(for: duration)
        return events.requests.count == connections
    }

    @Test func theAppSayingTheNetworkIsBackWakesAStreamTheNetworkFailed() async throws {
        let events = Events(scripts: [[.failBecause(.offline)]])
        let client = Self.client(events)
        let seen = EventRecorder(client.events(for: Self.id))
        #expect(await events.waitForConnections(1))
        #expect(await Self.staysAsleep(events, connections: 1), "a minute of backoff")
        client.networkDidReturn()
        #expect(await events.waitForConnections(2), "reconnected at once")
        events.send(.read([Events.profile(FakeTransport.profile(Self.id, "Ada", version: 2))]))
        #expect(await seen.wait { $0.contains(.updated(FakeTransport.profile(Self.id, "Ada", version: 2))) }, "\(seen.events)")
    }

    @Test func aRequestAnsweredAfterAnOutageWakesIt() async throws {
        let events = Events(scripts: [[.failBecause(.connection)]])
        let online = Flag()
        let client = Self.client(events, online: online)
        let seen = EventRecorder(client.events(for: Self.id))
        #expect(await events.waitForConnections(1))
        #expect(await Self.staysAsleep(events, connections: 1))
        online.set()
        _ = try await client.fetch(id: Self.id + 1, policy: .reloadFromServer)
        #expect(await events.waitForConnections(2), "an answer proves the network is back")
        _ = seen
    }

    @Test func aStreamTheServiceRefusedKeepsTheWaitItAskedFor() async throws {
        let events = Events(scripts: [[.refuse(FakeTransport.problem(429, kind: "too-many-streams", headers: ["retry-after": "60"]))]])
        let online = Flag()
        online.set()
        let client = Self.client(events, online: online)
        let seen = EventRecorder(client.events(for: Self.id))
        #expect(await events.waitForConnections(1))
        client.networkDidReturn()
        _ = try await client.fetch(id: Self.id + 1, policy: .reloadFromServer)
        #expect(await Self.staysAsleep(events, connections: 1), "Retry-After: 60 holds")
        _ = seen
    }

    @Test func resumingLiveUpdatesWakesAStreamAsleepInBackoff() async throws {
        let events = Events(scripts: [[.failBecause(.timedOut)]])
        let client = Self.client(events)
        let seen = EventRecorder(client.events(for: Self.id))
        #expect(await events.waitForConnections(1))
        #expect(await Self.staysAsleep(events, connections: 1))
        client.resumeLiveUpdates()
        #expect(await events.waitForConnections(2))
        _ = seen
    }
}
