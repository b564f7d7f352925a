import ServiceRuntime
public import Logging
public import MemcachedClient
public import PostgresClient

/// What one worker thread owns: its PostgreSQL connection, its memcached handle, and the
/// repository over both. Created on the worker's thread and used only there.
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
    /// When the batch being answered began: a request answered in it is timed from there, so its
    /// logged duration includes the multi-get and the answers before it.
    var batchStarted: ContinuousClock.Instant?
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

    /// A worker over real connections. Connects to PostgreSQL lazily, so a worker can start
    /// while the database is still down (cached reads are served meanwhile).
    ///
    /// - Parameters:
    ///   - databaseHealth: shared by every worker, so that one worker's failed or successful
    ///     connect decides for all (docs/design.md §5).
    ///   - databaseBulkhead: shared by the request workers, so that they cannot all wait on a
    ///     stalled database at once (docs/design.md §5.3).
    ///   - replicas: standbys for the rows of misses (docs/design.md §8); the worker numbered
    ///     `index` tries the standby `index` first, so the workers spread over them.
    public static func connecting(
        postgres: PostgresConfiguration, databaseHealth: PostgresServerHealth, databaseBulkhead: PostgresBulkhead? = nil,
        memcached: MemcachedConfiguration, shared: ProfileCacheShared, replicas: ReadReplicas? = nil, index: Int = 0,
        logger: Logger
    ) throws -> ProfileWorker {
        let connection = PostgresConnection(
            configuration: postgres, statements: PostgresProfileStore.statements, health: databaseHealth,
            bulkhead: databaseBulkhead, logger: logger)
        let store = PostgresProfileStore(connection: connection, logger: logger)
        let cache: MemcachedConnection
        do {
            cache = try MemcachedConnection(configuration: memcached, logger: logger)
        } catch {
            connection.close()
            throw error
        }
        let standby = replicas.flatMap { $0.standbys.isEmpty ? nil : PostgresStandbyReader(replicas: $0, first: index, logger: logger) }
        return ProfileWorker(store: store, cache: cache, shared: shared, logger: logger, standby: standby) {
            cache.close()
            connection.close()
            standby?.close()
        }
    }
}

@available(*, unavailable, message: "owns one worker thread's connections")
extension ProfileWorker: Sendable {}
