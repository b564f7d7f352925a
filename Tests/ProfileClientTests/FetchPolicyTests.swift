import Foundation
import Testing
import TestSupport

@testable import ProfileClient

/// Reads that may be answered from the store: cache-first answers what it holds without a
/// request, network-first falls back to it when the network gives no answer.
@Suite(.timeLimit(.minutes(1))) struct FetchPolicyTests {
    static let held = FakeTransport.profile(7, "Held", version: 3)

    static func client(_ transport: FakeTransport) -> ProfileClient {
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.retry = RetryPolicy(maximumAttempts: 1)
        configuration.followsLiveUpdates = false
        return ProfileClient(configuration: configuration, transport: transport)
    }

    @Test func cacheFirstAnswersWhatTheStoreHoldsWithoutARequest() async throws {
        let transport = FakeTransport { request, _ throws(TransportError) in
            FakeTransport.json(FakeTransport.profile(Int64(request.url.lastPathComponent)!, "Held", version: 3))
        }
        let client = Self.client(transport)
        _ = try await client.fetch(id: 7)
        #expect(try await client.fetch(id: 7, policy: .cacheFirst) == Self.held)
        #expect(transport.requests.count == 1, "answered from the store")
        _ = try await client.fetch(id: 8, policy: .cacheFirst)
        #expect(transport.requests.count == 2, "nothing held: the service")
    }

    @Test(arguments: [TransportError.Kind.offline, .connection, .timedOut])
    func networkFirstFallsBackToTheStoreWhenTheNetworkGivesNoAnswer(kind: TransportError.Kind) async throws {
        let online = ManagedFlag(true)
        let transport = FakeTransport { _, _ throws(TransportError) in
            guard online.value else { throw TransportError(kind: kind, description: "\(kind)") }
            return FakeTransport.json(Self.held)
        }
        let client = Self.client(transport)
        _ = try await client.fetch(id: 7)
        online.value = false
        #expect(try await client.fetch(id: 7, policy: .networkFirst) == Self.held)
        #expect(transport.requests.count == 2, "the service was asked first")
        await #expect(throws: ProfileClientError.self) { try await client.fetch(id: 8, policy: .networkFirst) }
        await #expect(throws: ProfileClientError.self) { try await client.fetch(id: 7, policy: .reloadFromServer) }
    }

    @Test func networkFirstDoesNotHideWhatTheServiceSaid() async throws {
        let transport = FakeTransport { _, index throws(TransportError) in
            index == 1 ? FakeTransport.json(Self.held) : FakeTransport.problem(404, kind: "profile-not-found")
        }
        let client = Self.client(transport)
        _ = try await client.fetch(id: 7)
        await #expect(throws: ProfileClientError.notFound) { try await client.fetch(id: 7, policy: .networkFirst) }
    }
}
