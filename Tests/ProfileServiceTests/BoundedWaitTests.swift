import Logging
import ProfileServiceTesting
import Testing

@testable import ProfileService

/// A slow read of one hot id never holds every worker: the HTTP server and the cache protocol on
/// the in-memory backends (ProfileServiceIntegrationTests runs it on the real servers).
@Suite struct BoundedWaitTests {
    @Test func aSlowReadOfOneHotIDNeverHoldsEveryWorker() throws {
        try CacheProtocolScenarios.aSlowReadOfOneHotIDNeverHoldsEveryWorker(InMemoryBackends.self) { shared, logger in
            ProfileWorker(
                store: InMemoryBackends.database.store(), cache: InMemoryBackends.cluster.client(), shared: shared,
                logger: logger)
        }
    }
}
