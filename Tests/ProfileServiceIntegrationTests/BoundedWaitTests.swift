import Logging
import MemcachedClient
import PostgresClient
import ProfileServiceTesting
import TestSupport
import Testing

@testable import ProfileService

/// A slow read of one hot id never holds every worker, on the real PostgreSQL and memcached
/// (ProfileServiceTests runs the same scenario in memory).
@Suite(.serialized, .requires(.postgres, .memcached)) struct BoundedWaitTests {
    @Test func aSlowReadOfOneHotIDNeverHoldsEveryWorker() throws {
        let postgres = try PostgresConfiguration(url: TestEnvironment.databaseURL)
        let memcached = try MemcachedConfiguration(servers: TestEnvironment.memcachedServerList)
        let health = PostgresServerHealth()
        try CacheProtocolScenarios.aSlowReadOfOneHotIDNeverHoldsEveryWorker(IntegrationBackends.self) { shared, logger in
            try ProfileWorker.connecting(
                postgres: postgres, databaseHealth: health, memcached: memcached, shared: shared, logger: logger)
        }
    }
}
