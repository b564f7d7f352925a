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

/// What keeping the store bounded costs: proportional to what changed, not to what is held.
@Suite(.timeLimit(.minutes(1))) struct EvictionCostTests {
    /// A store full of observed ids (nothing it may forget): publishing to them again and again
    /// scans the store once per tenth of its capacity that arrives, not once per publish.
    @Test func publishingToAStoreFullOfObservedIDsScansOncePerTenthArrived() async throws {
        let transport = FakeTransport { request, _ throws(TransportError) in
            FakeTransport.json(FakeTransport.profile(Int64(request.url.lastPathComponent)!, "P", version: 1))
        }
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.storeCapacity = 100
        configuration.followsLiveUpdates = false
        let client = ProfileClient(configuration: configuration, transport: transport)
        let observed = (Int64(1)...300).map { client.updates(for: $0) }
        for round in 0..<5 {
            for id in Int64(1)...300 { _ = try await client.fetch(id: id, policy: .reloadFromServer) }
            if round == 0 { #expect(await client.cache.count == 300, "every id is observed: none may go") }
        }
        let scans = await client.cache.evictionScans
        // 200 ids arrived above the capacity, a scan per 10 of them; 1,200 publishes after made none.
        #expect(scans <= 21, "\(scans) scans for 1,500 publishes")
        _ = observed
    }

    /// Closing a screen of 1,000 followed rows sorts the idle ids about once per tenth of the
    /// capacity, not once per row.
    @available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
    @MainActor
    @Test func closingAScreenOfRowsCostsAPassPerTenthOfTheCapacity() async throws {
        let transport = FakeTransport { request, _ throws(TransportError) in
            FakeTransport.json(FakeTransport.profile(Int64(request.url.lastPathComponent)!, "P", version: 1))
        }
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.followsLiveUpdates = false
        let profiles = ObservableProfiles(client: ProfileClient(configuration: configuration, transport: transport), capacity: 100)
        let rows = (Int64(1)...1_000).map { id in Task { await profiles.follow(id) } }
        let deadline = ContinuousClock.now + .seconds(20)
        while (Int64(1)...1_000).contains(where: { profiles.profile($0) == nil }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(profiles.evictionPasses == 0, "every row is followed: none may go")
        for row in rows { row.cancel() }
        for row in rows { await row.value }
        #expect(profiles.evictionPasses <= 90, "\(profiles.evictionPasses) passes for 1,000 rows")
        #expect(profiles.evictionPasses >= 1, "the idle rows beyond the capacity went")
        #expect(profiles.profile(1_000) != nil, "the most recently followed rows are kept")
    }
}
