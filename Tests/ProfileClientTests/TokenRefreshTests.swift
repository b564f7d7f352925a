import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient

/// A token the service refused is refreshed once, however many requests it refused at once.
@Suite(.timeLimit(.minutes(1))) struct TokenRefreshTests {
    /// A token source as an app has one: it hands its cached token until told that the service
    /// refused it, and counts those refreshes.
    final class TokenSource: Sendable {
        private let state = Mutex((token: "old", refreshes: 0))

        var refreshes: Int { state.withLock { $0.refreshes } }
        var token: String { state.withLock { $0.token } }

        func refused(_ token: String) async {
            try? await Task.sleep(for: .milliseconds(5))  // a round trip to the identity provider
            state.withLock { state in
                state.refreshes += 1
                state.token = "fresh-\(state.refreshes)"
            }
        }
    }

    @Test func concurrentRequestsRefusedWithOneTokenShareOneRefresh() async throws {
        let count = 6
        let tokens = TokenSource()
        // Every request with the stale token is held until all of them arrived, then refused.
        let stale = Mutex(0)
        let allArrived = Gate()
        let transport = FakeTransport { request, _ throws(TransportError) in
            guard request.headers["Authorization"] == "Bearer old" else {
                return FakeTransport.json(FakeTransport.profile(Int64(request.url.lastPathComponent)!, "Ada", version: 1))
            }
            if stale.withLock({ $0 += 1; return $0 }) == count { allArrived.open() }
            await allArrived.wait()
            return FakeTransport.problem(401, kind: "unauthorized")
        }
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.tokenProvider = { tokens.token }
        configuration.tokenRejected = { await tokens.refused($0) }
        let client = ProfileClient(configuration: configuration, transport: transport, eventTransport: nil)

        try await withThrowingTaskGroup(of: Profile.self) { group in
            for id in 1...count { group.addTask { try await client.fetch(id: Int64(id)) } }
            for try await profile in group { #expect(profile.displayName == "Ada") }
        }
        #expect(tokens.refreshes == 1, "one refresh for \(count) requests refused together")
        let retried = transport.requests.filter { $0.headers["Authorization"] != "Bearer old" }
        #expect(retried.count == count && retried.allSatisfy { $0.headers["Authorization"] == "Bearer fresh-1" })
    }

    @Test func aRefreshThatGaveNoFreshTokenIsAskedForAgainByTheNextRefusal() async throws {
        let refreshes = Mutex(0)
        let transport = FakeTransport { _, _ throws(TransportError) in FakeTransport.problem(401, kind: "unauthorized") }
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.tokenProvider = { "old" }  // the identity provider was unreachable: no fresh token
        configuration.tokenRejected = { _ in refreshes.withLock { $0 += 1 } }
        let client = ProfileClient(configuration: configuration, transport: transport, eventTransport: nil)
        await #expect(throws: ProfileClientError.unauthorized) { try await client.fetch(id: 1) }
        await #expect(throws: ProfileClientError.unauthorized) { try await client.fetch(id: 1) }
        #expect(refreshes.withLock { $0 } == 2, "the app is told again, so that it can try again")
    }
}
