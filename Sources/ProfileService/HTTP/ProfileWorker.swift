public import Logging
public import MemcachedClient
public import PostgresClient

/// What one worker thread owns: its PostgreSQL connection, its memcached handle, and the
/// repository over both. Created on the worker's thread and used only there.
public final class ProfileWorker {
    public let store: any ProfileStore
    public let repository: ProfileRepository
    private let cache: any CacheClient
    /// This thread's metric handles (see ``ServiceMetrics``).
    let requestSeries = RequestSeriesCache()
    private let closeConnections: () -> Void

    /// - Parameter closeConnections: closes what the worker owns; run when the worker is
    ///   released, which the server does on the worker's own thread as it exits.
    public init(
        store: any ProfileStore, cache: any CacheClient, shared: ProfileCacheShared, logger: Logger,
        closeConnections: @escaping () -> Void = {}
    ) {
        self.store = store
        self.cache = cache
        self.repository = ProfileRepository(store: store, cache: cache, shared: shared, logger: logger)
        self.closeConnections = closeConnections
    }

    deinit {
        closeConnections()
    }

    /// Whether memcached answers a lookup for this worker now (any answer but a failure).
    public func isCacheReachable() -> Bool {
        if case .failure = cache.get("profile-service:readyz") { return false }
        return true
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
        let cache: MemcachedConnection
        do {
            cache = try MemcachedConnection(configuration: memcached, logger: logger)
        } catch {
            connection.close()
            throw error
        }
        return ProfileWorker(store: store, cache: cache, shared: shared, logger: logger) {
            cache.close()
            connection.close()
        }
    }
}

@available(*, unavailable, message: "owns one worker thread's connections")
extension ProfileWorker: Sendable {}
