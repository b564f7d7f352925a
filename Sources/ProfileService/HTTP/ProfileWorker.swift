public import Logging
public import MemcachedClient
public import PostgresClient

/// What one worker thread owns: its PostgreSQL connection, its memcached handle, and the
/// repository over both. Created on the worker's thread and used only there.
public final class ProfileWorker {
    public let store: any ProfileStore
    public let repository: ProfileRepository

    public init(store: any ProfileStore, cache: any CacheClient, shared: ProfileCacheShared, logger: Logger) {
        self.store = store
        self.repository = ProfileRepository(store: store, cache: cache, shared: shared, logger: logger)
    }

    /// A worker over real connections. Connects to PostgreSQL lazily, so a worker can start
    /// while the database is still down (cached reads are served meanwhile).
    public static func connecting(
        postgres: PostgresConfiguration, memcached: MemcachedConfiguration, shared: ProfileCacheShared,
        logger: Logger
    ) throws -> ProfileWorker {
        let connection = PostgresConnection(
            configuration: postgres, statements: PostgresProfileStore.statements, logger: logger)
        let store = PostgresProfileStore(connection: connection, logger: logger)
        let cache = try MemcachedConnection(configuration: memcached, logger: logger)
        return ProfileWorker(store: store, cache: cache, shared: shared, logger: logger)
    }
}

@available(*, unavailable, message: "owns one worker thread's connections")
extension ProfileWorker: Sendable {}
