import Dispatch
import Foundation
import Logging
import MemcachedClient
import PostgresClient
import Synchronization
import ProfileServiceTesting
import TestSupport

@testable import ProfileService

/// One thread's real connections (PostgreSQL and the memcached cluster of scripts/deps.sh).
/// Create it on the thread that uses it: the connections check their owner thread.
final class IntegrationBackends: RepositoryBackends {
    let connection: PostgresConnection
    let cache: MemcachedConnection
    let store: PostgresProfileStore
    static let logger = Logger(label: "test")

    init() throws {
        try TestEnvironment.requirePostgres()
        try TestEnvironment.requireMemcached()
        connection = PostgresConnection(
            configuration: try PostgresConfiguration(url: TestEnvironment.databaseURL),
            statements: PostgresProfileStore.statements(for: .standard), logger: Self.logger)
        try connection.connect()
        cache = try MemcachedConnection(
            configuration: try MemcachedConfiguration(servers: TestEnvironment.memcachedServerList),
            logger: Self.logger)
        store = PostgresProfileStore(connection: connection, logger: Self.logger)
    }

    func repository(_ shared: ProfileCacheShared, cache: (any CacheClient)? = nil) -> ProfileRepository {
        ProfileRepository(store: store, cache: cache ?? self.cache, shared: shared, logger: Self.logger)
    }

    /// A new profile at version 1 with an id no other test uses, and no cache entry.
    func seed() throws -> Profile {
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        let profile = try store.create(id: id, username: "u\(id)", displayName: "Seed \(id)")
        _ = cache.delete(ProfileCacheConfiguration().key(for: id))
        return profile
    }

    /// The version of the profile entry cached for `id`, `nil` when there is none.
    func cachedVersion(_ id: Int64, shared: ProfileCacheShared) -> Int32? {
        guard case .hit(let item) = cache.get(shared.configuration.key(for: id)),
            case .profile(let version, _, _)? = CacheEntry(decoding: item.value, shape: ProfileFieldCatalog.standard.shape)
        else { return nil }
        return version
    }

    func evict(_ id: Int64, shared: ProfileCacheShared) {
        _ = cache.delete(shared.configuration.key(for: id))
    }

    deinit {
        cache.close()
        connection.close()
    }
}
