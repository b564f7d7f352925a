public import Logging
import MemcachedClient
public import ProfileService
import TestSupport

/// One thread's in-memory backends: the same shape as the integration tests' real connections
/// (`IntegrationBackends`), so the cache protocol's tests read the same and run without servers,
/// in parallel, in milliseconds.
///
/// Every instance shares one process-wide cluster and database, as every connection shares the
/// real servers; tests stay apart by using ids no other test uses (``seed()``).
public final class InMemoryBackends {
    public static let cluster = InMemoryCache(nodes: 2)
    public static let database = InMemoryDatabase()
    public static let logger = Logger(label: "test")

    public let cache: InMemoryCache.Client
    public let store: InMemoryProfileStore

    public convenience init() throws {
        try self.init(cluster: Self.cluster, database: Self.database)
    }

    /// Backends on a cluster and a database of the test's own, for a test that fails them (an
    /// outage of the shared ones would reach every test running beside it).
    public init(cluster: InMemoryCache, database: InMemoryDatabase) throws {
        cache = cluster.client()
        store = database.store()
    }

    public func repository(_ shared: ProfileCacheShared, cache: (any CacheClient)? = nil) -> ProfileRepository {
        ProfileRepository(store: store, cache: cache ?? self.cache, shared: shared, logger: Self.logger)
    }

    /// A repository that reads the rows of misses from `standby` when it may (docs/design.md §8).
    public func repository(_ shared: ProfileCacheShared, standby: any StandbyReader) -> ProfileRepository {
        ProfileRepository(store: store, cache: cache, shared: shared, logger: Self.logger, standby: standby)
    }

    /// A new profile at version 1 with an id no other test uses, and no cache entry.
    public func seed() throws -> Profile {
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        let profile = try store.create(id: id, username: "u\(id)", displayName: "Seed \(id)")
        _ = cache.delete(ProfileCacheEntries.key(for: id))
        return profile
    }

    /// The version of the profile entry cached for `id`, `nil` when there is none.
    public func cachedVersion(_ id: Int64, shared: ProfileCacheShared) -> Int32? {
        guard case .hit(let item) = cache.get(ProfileCacheEntries.key(for: id)) else { return nil }
        return ProfileCacheEntries.version(of: item.value)
    }

    public func evict(_ id: Int64, shared: ProfileCacheShared) {
        _ = cache.delete(ProfileCacheEntries.key(for: id))
    }
}
