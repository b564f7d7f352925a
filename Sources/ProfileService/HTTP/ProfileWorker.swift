import ServiceRuntime
public import Logging
public import MemcachedClient
public import PostgresClient

/// What one worker thread owns: its memcached handle, its store (over PostgreSQL connections
/// it owns or borrows), and the repository over both. Created on the worker's thread and used
/// only there.
public final class ProfileWorker {
    public let store: any ProfileStore
    public let repository: ProfileRepository
    /// The worker's memcached connection behind the shared circuit breaker.
    private let cache: CircuitBreakingCacheClient
    /// This thread's metric handles (see ``ServiceMetrics``).
    let requestSeries = RequestSeriesCache()
    /// This thread's access-log line, reused request after request (see ``AccessLog``).
    var accessLogLine: LogLine?
    /// Whether this worker takes queued requests in batches (``ProfileResponder/batchLimit(worker:)``).
    var batchPolicy = BatchPolicy()
    private let closeConnections: () -> Void

    /// - Parameter closeConnections: closes what the worker owns; run when the worker is
    ///   released, which the server does on the worker's own thread as it exits.
    public init(
        store: any ProfileStore, cache: any CacheClient, shared: ProfileCacheShared, logger: Logger,
        standby: (any StandbyReader)? = nil, closeConnections: @escaping () -> Void = {}
    ) {
        let guarded = CircuitBreakingCacheClient(cache, breaker: shared.circuitBreaker)
        self.store = store
        self.cache = guarded
        self.repository = ProfileRepository(store: store, cache: guarded, shared: shared, logger: logger, standby: standby)
        self.closeConnections = closeConnections
    }

    deinit {
        closeConnections()
    }

    /// The entry memcached holds for `id` now, through the circuit breaker, as a check of its own
    /// (the consistency observer, docs/design.md §3.8).
    func cacheLookup(id: Int64) -> MemcachedGetResult {
        cache.beginRequest()
        return cache.get(repository.configuration.key(for: id))
    }

    /// memcached as `/readyz` reports it.
    public enum CacheReadiness: String, Sendable {
        /// Every node answered.
        case up
        /// Some nodes answered.
        case degraded
        /// No node answered.
        case down
    }

    /// One round trip to each memcached node, through the circuit breaker: a node it skips
    /// counts as down at no cost, so `/readyz` never waits on a hung node the breaker knows.
    public func cacheReadiness() -> CacheReadiness {
        let servers = cache.servers
        let answered = servers.count { cache.ping(server: $0) == nil }
        if answered == servers.count { return .up }
        return answered == 0 ? .down : .degraded
    }

    /// A worker over real servers: a memcached connection of its own, and PostgreSQL connections
    /// borrowed from `databases` per statement (docs/design.md §9). Connects to PostgreSQL
    /// lazily, so a worker can start while the database is still down (cached reads are served
    /// meanwhile).
    public static func connecting(
        databases: DatabasePools, memcached: MemcachedConfiguration, shared: ProfileCacheShared, logger: Logger
    ) throws -> ProfileWorker {
        try connecting(databases: databases, memcached: memcached, shared: shared, logger: logger) {}
    }

    /// A worker with one PostgreSQL connection of its own, closed with it: for a thread beside
    /// the request workers (the live updates' fetchers, the consistency observer).
    ///
    /// - Parameter databaseHealth: shared by every connection to the server, so that one
    ///   connection's failed or successful connect decides for all (docs/design.md §5).
    public static func connecting(
        postgres: PostgresConfiguration, databaseHealth: PostgresServerHealth, memcached: MemcachedConfiguration,
        shared: ProfileCacheShared, logger: Logger
    ) throws -> ProfileWorker {
        let databases = DatabasePools(
            postgres: postgres, connections: 1, health: databaseHealth, profileFields: shared.configuration.profileFields,
            logger: logger)
        return try connecting(databases: databases, memcached: memcached, shared: shared, logger: logger) {
            databases.close()
        }
    }

    private static func connecting(
        databases: DatabasePools, memcached: MemcachedConfiguration, shared: ProfileCacheShared, logger: Logger,
        closeDatabases: @escaping () -> Void
    ) throws -> ProfileWorker {
        let cache: MemcachedConnection
        do {
            cache = try MemcachedConnection(configuration: memcached, logger: logger)
        } catch {
            closeDatabases()
            throw error
        }
        let store = PostgresProfileStore(pool: databases.primary, catalog: databases.profileFields, logger: logger)
        return ProfileWorker(store: store, cache: cache, shared: shared, logger: logger, standby: databases.standbys) {
            cache.close()
            closeDatabases()
        }
    }
}

@available(*, unavailable, message: "owns one worker thread's memcached connection")
extension ProfileWorker: Sendable {}
