import Foundation
import Testing

@testable import ProfileClient

/// The client's store stays bounded: ids nobody uses are forgotten, least recently used first.
@Suite(.timeLimit(.minutes(1))) struct StoreEvictionTests {
    @Test func theStoreForgetsIDsNobodyObservesLeastRecentlyUsedFirst() async throws {
        let transport = FakeTransport { request, _ throws(TransportError) in
            let id = Int64(request.url.lastPathComponent)!
            return FakeTransport.json(FakeTransport.profile(id, "P", version: 1))
        }
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.storeCapacity = 10
        configuration.followsLiveUpdates = false
        let client = ProfileClient(configuration: configuration, transport: transport)
        let observed = client.updates(for: 1)
        for id in Int64(1)...40 { _ = try await client.fetch(id: id) }
        #expect(await client.cache.count <= 10)
        #expect(await client.cache.confirmedProfile(id: 1) != nil, "an observed id is kept")
        #expect(await client.cache.confirmedProfile(id: 40) != nil, "the most recent is kept")
        #expect(await client.cache.confirmedProfile(id: 2) == nil, "the least recently used goes first")
        _ = observed
    }
}
