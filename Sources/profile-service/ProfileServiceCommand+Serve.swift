import ArgumentParser
import Dispatch
import Glibc
import HTTPServer
import Logging
import Metrics
import MemcachedClient
import PostgresClient
import Prometheus
import ProfileService
import ServiceRuntime

extension ProfileServiceCommand {
    struct Serve: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the HTTP service.",
            discussion: """
                Stops gracefully on SIGTERM or SIGINT: /readyz turns 503 at once, new connections are
                refused and event streams closed after --shutdown-delay-s, in-flight requests finish
                within --drain-timeout-s.
                """)

        @Option(help: "Address to listen on. [PROFILE_HOST]")
        var host: String = EnvironmentDefaults.string("PROFILE_HOST", "127.0.0.1")

        @Option(help: "TCP port to listen on (0 picks a free one). [PROFILE_PORT]")
        var port: Int = EnvironmentDefaults.int("PROFILE_PORT", 8080)

        @OptionGroup var database: DatabaseOptions
        @OptionGroup var replica: ReplicaOptions
        @OptionGroup var auth: AuthOptions

        @Option(help: "memcached cluster as host:port,host:port. [PROFILE_MEMCACHED]")
        var memcached: String = EnvironmentDefaults.string("PROFILE_MEMCACHED", "127.0.0.1:21211,127.0.0.1:21212")

        @OptionGroup var cacheCluster: CacheClusterOption

        @Option(help: "memcached connect and poll timeout in milliseconds. [PROFILE_MEMCACHED_TIMEOUT_MS]")
        var memcachedTimeoutMs: Int = EnvironmentDefaults.int("PROFILE_MEMCACHED_TIMEOUT_MS", 100)

        @Option(
            help: """
                Seconds a failing memcached node is skipped before one request probes it (fractions \
                allowed). [PROFILE_MEMCACHED_RETRY_S]
                """)
        var memcachedRetryS: Double = EnvironmentDefaults.double("PROFILE_MEMCACHED_RETRY_S", 0.5)

        @Option(
            help: """
                Longest a request waits for another request's PostgreSQL read of the same id, then 503; \
                at most half the workers wait so at once. [PROFILE_COALESCED_WAIT_MS]
                """)
        var coalescedWaitMs: Int = EnvironmentDefaults.int("PROFILE_COALESCED_WAIT_MS", 500)

        @Option(help: "Cache entry lifetime in seconds (±10% jitter). [PROFILE_CACHE_TTL_S]")
        var cacheTtlS: Int = EnvironmentDefaults.int("PROFILE_CACHE_TTL_S", 300)

        @Option(
            help: """
                Worker threads: requests answered at once. Each waits on memcached and PostgreSQL \
                round trips and owns a memcached connection to each node; PostgreSQL connections \
                come from --database-connections. [PROFILE_WORKERS]
                """)
        var workers: Int = EnvironmentDefaults.int("PROFILE_WORKERS", 64)

        @Option(
            help: """
                Worker threads that answer cache hits in batches: each takes every queued profile \
                read and update (up to 64) and looks the reads up with one memcached multi-get; the \
                misses go to --workers to be loaded together, the updates to be made together in one \
                statement, all other requests alone. 0: every request goes to --workers alone. \
                Default: two per event loop, at least 4. [PROFILE_BATCH_WORKERS]
                """)
        var batchWorkers: Int?

        /// `--batch-workers`, else `PROFILE_BATCH_WORKERS`; nil: sized by the event loops.
        private var chosenBatchWorkers: Int? {
            batchWorkers ?? EnvironmentDefaults.optionalInt("PROFILE_BATCH_WORKERS")
        }

        @Option(
            help: """
                Event loops: threads that accept, read, parse and write connections, each serving \
                its share of them. 0: one per CPU the process may use (its CPU affinity, as taskset \
                sets it, and its cgroup's CPU quota), not the host's core count. [PROFILE_EVENT_LOOPS]
                """)
        var eventLoops: Int = EnvironmentDefaults.int("PROFILE_EVENT_LOOPS", 0)

        @Option(
            help: """
                PostgreSQL connections the workers share, at most (and as many to each read \
                replica); each statement borrows one. With all of them busy a request waits for one \
                only while PostgreSQL makes progress, else 503 at once, so cached reads never wait \
                behind a stalled database. [PROFILE_DATABASE_CONNECTIONS]
                """)
        var databaseConnections: Int = EnvironmentDefaults.int("PROFILE_DATABASE_CONNECTIONS", 16)

        @Option(help: .hidden)
        var databaseConcurrency: Int = EnvironmentDefaults.int("PROFILE_DATABASE_CONCURRENCY", 0)

        @Option(help: "Requests that may wait for a worker; beyond that 503 at once. [PROFILE_QUEUE_CAPACITY]")
        var queueCapacity: Int = EnvironmentDefaults.int("PROFILE_QUEUE_CAPACITY", 1024)

        @Option(help: "Open connections at most. [PROFILE_MAX_CONNECTIONS]")
        var maxConnections: Int = EnvironmentDefaults.int("PROFILE_MAX_CONNECTIONS", 10_000)

        @Option(
            help: """
                Gateways in front of the service that each append the address they saw to \
                X-Forwarded-For (nginx, Envoy): the client's address for per-client limits is the \
                entry this many from the right; 0 uses the socket's peer. [PROFILE_TRUSTED_PROXY_HOPS]
                """)
        var trustedProxyHops: Int = EnvironmentDefaults.int("PROFILE_TRUSTED_PROXY_HOPS", 0)

        @Option(help: "Idle keep-alive timeout in seconds (keep it above the gateway's). [PROFILE_IDLE_TIMEOUT_S]")
        var idleTimeoutS: Int = EnvironmentDefaults.int("PROFILE_IDLE_TIMEOUT_S", 75)

        @Option(help: "Seconds a client has to send a request head. [PROFILE_HEAD_TIMEOUT_S]")
        var headTimeoutS: Int = EnvironmentDefaults.int("PROFILE_HEAD_TIMEOUT_S", 10)

        @Option(help: "Seconds between SIGTERM and refusing new connections. [PROFILE_SHUTDOWN_DELAY_S]")
        var shutdownDelayS: Int = EnvironmentDefaults.int("PROFILE_SHUTDOWN_DELAY_S", 0)

        @Option(help: "Seconds in-flight requests get to finish on shutdown. [PROFILE_DRAIN_TIMEOUT_S]")
        var drainTimeoutS: Int = EnvironmentDefaults.int("PROFILE_DRAIN_TIMEOUT_S", 10)

        @Flag(
            inversion: .prefixedNo,
            help: """
                Repair the cache from PostgreSQL's commit stream (needs wal_level=logical); one \
                instance of a cluster consumes it, the others stand by. [PROFILE_CHANGE_FEED=true|false]
                """)
        var changeFeed: Bool = EnvironmentDefaults.bool("PROFILE_CHANGE_FEED", true)

        @Option(
            help: """
                Share of the changes the change feed applies that are checked against memcached and \
                PostgreSQL after --consistency-check-delay-ms (profile_service_consistency_checks_total); 0 \
                turns it off. [PROFILE_CONSISTENCY_SAMPLE_RATE]
                """)
        var consistencySampleRate: Double = EnvironmentDefaults.double("PROFILE_CONSISTENCY_SAMPLE_RATE", 0.01)

        @Option(help: "Milliseconds after a change is applied that it is checked. [PROFILE_CONSISTENCY_CHECK_DELAY_MS]")
        var consistencyCheckDelayMs: Int = EnvironmentDefaults.int("PROFILE_CONSISTENCY_CHECK_DELAY_MS", 2000)

        @Flag(
            inversion: .prefixedNo,
            help: "One access-log line per request. [PROFILE_ACCESS_LOG=true|false]")
        var accessLog: Bool = EnvironmentDefaults.bool("PROFILE_ACCESS_LOG", true)

        @OptionGroup var logging: LoggingOptions
        @OptionGroup var liveUpdates: LiveUpdateOptions

        func validate() throws {
            let chosenBatchWorkers = chosenBatchWorkers  // read first: a malformed variable is reported below
            try EnvironmentDefaults.validate()
            try require(port, in: 0...65_535, "--port")
            try require(workers, in: 1...1024, "--workers")
            if let chosenBatchWorkers { try require(chosenBatchWorkers, in: 0...64, "--batch-workers") }
            try require(eventLoops, in: 0...256, "--event-loops")
            try require(databaseConnections, in: 1...1024, "--database-connections")
            try require(databaseConcurrency, in: 0...1024, "--database-concurrency")
            guard (0...1).contains(consistencySampleRate) else {
                throw ValidationError("--consistency-sample-rate must be 0…1, got \(consistencySampleRate)")
            }
            try require(consistencyCheckDelayMs, in: 1...600_000, "--consistency-check-delay-ms")
            try require(queueCapacity, in: 1...1_000_000, "--queue-capacity")
            try require(maxConnections, in: 1...1_000_000, "--max-connections")
            guard liveUpdates.maxSubscribers <= maxConnections * 9 / 10 else {
                throw ValidationError(
                    "--max-subscribers (\(liveUpdates.maxSubscribers)) must be at most 90 % of --max-connections (\(maxConnections)): streams must leave room for other requests")
            }
            try require(trustedProxyHops, in: 0...16, "--trusted-proxy-hops")
            try require(memcachedTimeoutMs, in: 1...60_000, "--memcached-timeout-ms")
            guard (0.05...3600).contains(memcachedRetryS) else {
                throw ValidationError("--memcached-retry-s must be 0.05…3600, got \(memcachedRetryS)")
            }
            try require(cacheTtlS, in: 1...2_592_000, "--cache-ttl-s")
            try require(coalescedWaitMs, in: 1...60_000, "--coalesced-wait-ms")
            try require(idleTimeoutS, in: 1...3600, "--idle-timeout-s")
            try require(headTimeoutS, in: 1...3600, "--head-timeout-s")
            try require(shutdownDelayS, in: 0...3600, "--shutdown-delay-s")
            try require(drainTimeoutS, in: 0...3600, "--drain-timeout-s")
            guard !host.isEmpty else { throw ValidationError("--host must not be empty") }
            _ = try memcachedConfiguration()
            _ = try auth.authorization()
        }

        /// One connect on `line` before anything starts. A failure retrying cannot fix (a
        /// password, a certificate, an unknown database, a pooler where PostgreSQL itself is
        /// needed) stops the process with libpq's reason, instead of serving cached reads on and
        /// logging retries; any other (PostgreSQL down or starting) is logged by the connection,
        /// and the service starts and retries as it does later.
        func checkDatabaseAtStart(_ postgres: PostgresConfiguration, line: String, logger: Logger) throws {
            let connection = PostgresConnection(configuration: postgres, statements: [], logger: logger)
            defer { connection.close() }
            do {
                try connection.connect()
            } catch let error as PostgresError where error.isPoolerRefusingStartupParameters {
                throw RuntimeFailure(
                    description: "cannot connect to PostgreSQL: \(error.message) (\(line) reaches a connection pooler: "
                        + "give the pooler as --database-url and PostgreSQL itself as --database-direct-url)")
            } catch let error as PostgresError where error.isPermanentConnectFailure {
                throw RuntimeFailure(description: "cannot connect to PostgreSQL (\(line)): \(error.message)")
            } catch {
                logger.warning("PostgreSQL is not reachable at start; serving cached reads while retrying")
                return
            }
            guard postgres.isPooled,
                (try? connection.simpleQuery("SHOW statement_timeout").rows.first?.decode("statement_timeout", as: String.self)) == "0"
            else { return }
            // Through a pooler the service sends no session settings: the role's own bound statements.
            logger.warning(
                "statement_timeout is not set for this role or database: through a pooler only the client-side deadline bounds a statement",
                metadata: ["fix": "ALTER ROLE <role> SET statement_timeout = '5s'; ALTER ROLE <role> SET lock_timeout = '2s'"])
        }

        /// The declared profile fields (docs/design.md §11), read once before anything starts:
        /// they shape every statement, body and cache entry. While PostgreSQL cannot be reached
        /// the instance waits for it, logging, and answers on its port meanwhile — `/healthz` 200,
        /// `/readyz` 503 with libpq's reason, anything else 503 (``StartingResponder``) — since it
        /// cannot serve a profile before it knows what a profile is.
        func declaredProfileFields(_ postgres: PostgresConfiguration, logger: Logger) throws -> ProfileFieldCatalog {
            var waiting: (server: HTTPServer<StartingResponder>, responder: StartingResponder)?
            defer {
                if let waiting {
                    waiting.server.shutdown()
                    waiting.server.waitUntilStopped()
                }
            }
            while true {
                let connection = PostgresConnection(configuration: postgres, statements: [], logger: logger)
                defer { connection.close() }
                do {
                    try connection.connect()
                    switch try ProfileFieldCatalog.load(from: connection) {
                    case .declared(let catalog):
                        logger.info(
                            "profile fields",
                            metadata: [
                                "fields": "\(catalog.declarations.map(\.name))",
                                "max_write_body_bytes": "\(catalog.maximumWriteBodyBytes)",
                            ])
                        return catalog
                    case .notMigrated:
                        logger.warning(
                            "the database has no profile_fields table: profiles carry their display name alone until `profile-service migrate` runs and the instance restarts")
                        return .none
                    }
                } catch let error as ProfileFieldCatalogError {
                    throw RuntimeFailure(description: "cannot serve the declared profile fields: \(error)")
                } catch {
                    let reason = (error as? PostgresError)?.message ?? "\(error)"
                    if waiting == nil {
                        logger.warning("waiting for PostgreSQL to read the declared profile fields", metadata: ["error": "\(reason)"])
                        let responder = StartingResponder()
                        var configuration = serverConfiguration()
                        configuration.workerCount = 1
                        configuration.batchWorkerCount = 0
                        configuration.drainTimeout = .seconds(1)
                        let server = HTTPServer(configuration: configuration, responder: responder, logger: logger)
                        do {
                            _ = try server.start()
                        } catch {
                            throw RuntimeFailure(description: "cannot start the server on \(host):\(port): \(error)")
                        }
                        waiting = (server, responder)
                    }
                    waiting?.responder.waiting(because: reason)
                    usleep(1_000_000)
                }
            }
        }

        func run() throws {
            try logging.bootstrap()
            let prometheus = PrometheusCollectorRegistry()
            var metricsFactory = PrometheusMetricsFactory(registry: prometheus)
            metricsFactory.defaultDurationHistogramBuckets = [
                .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
                .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
                .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
            ]
            MetricsSystem.bootstrap(metricsFactory)
            let metrics = ServiceMetrics()
            metrics.observe(logSink: .standardError)
            let build = MetricsExposition.Build(
                version: ProfileServiceCommand.version, revision: ProfileServiceCommand.revision)
            let observability = ProfileResponder.Observability(
                metrics: metrics, accessLog: accessLog ? AccessLog(format: try logging.format()) : nil
            ) {
                var buffer: [UInt8] = []
                buffer.reserveCapacity(16 * 1024)
                prometheus.emit(into: &buffer)
                return MetricsExposition.render(buffer, process: ProcessStatistics.current(), build: build)
            }
            let logger = Logger(label: "profile-service")
            auth.logMode(logger)
            // Two lines to PostgreSQL: `postgres` for requests (maybe a pooler), `direct` for the
            // change feed, LISTEN and the replica monitor (docs/deployment.md).
            let postgres = try database.postgresConfiguration()
            let direct = try database.directConfiguration()
            try checkDatabaseAtStart(postgres, line: "--database-url", logger: logger)
            if database.isPooled { try checkDatabaseAtStart(direct, line: "--database-direct-url", logger: logger) }
            let profileFields = try declaredProfileFields(direct, logger: logger)
            let memcached = try memcachedConfiguration()
            var cache = ProfileCacheConfiguration()
            cache.profileFields = profileFields
            cache.ttl = .seconds(cacheTtlS)
            cache.coalescedWait = .milliseconds(coalescedWaitMs)
            cache.maximumCoalescedWaiters = max(1, workers / 2)
            let shared = ProfileCacheShared(
                configuration: cache, circuitBreaker: NodeCircuitBreaker(openDuration: .seconds(memcachedRetryS)))
            let databaseHealth = PostgresServerHealth()
            let replicas = try replica.replicas()
            if databaseConcurrency > 0 {
                logger.warning(
                    "--database-concurrency is deprecated: it sets --database-connections",
                    metadata: ["connections": "\(databaseConcurrency)"])
            }
            // The request workers' connections only: the hub's fetchers and the feed have their own.
            let databases = DatabasePools(
                postgres: postgres, connections: databaseConcurrency > 0 ? databaseConcurrency : databaseConnections,
                health: databaseHealth, replicas: replicas, profileFields: profileFields, logger: logger)
            let cluster = try cacheCluster.cluster()
            let feed = changeFeed(cluster: cluster, postgres: direct, memcached: memcached, shared: shared, logger: logger)
            let lifecycle = ServiceLifecycle(
                changeFeed: feed?.monitor ?? ChangeFeedMonitor(enabled: false, cluster: cluster), replicas: replicas,
                databaseHealth: databaseHealth)
            let streams = EventStreams(configuration: liveUpdates.streamsConfiguration())
            let hub = ProfileUpdateHub(streams: streams, logger: logger)
            // The threads beside the server: the change feed, then the live updates' two fetch
            // threads (connections of their own) and their change listener. Started before the
            // server, stopped after it in reverse order under one deadline.
            let fetchers = hub.fetchers(threads: 2) {
                try ProfileWorker.connecting(
                    postgres: postgres, databaseHealth: databaseHealth, memcached: memcached, shared: shared,
                    logger: logger)
            }
            let monitor = replicas.map { ReplicaMonitor(replicas: $0, primary: direct, logger: logger) }
            let background = ServiceGroup(
                (feed.map { [$0] } ?? []) + (monitor.map { [$0] } ?? [])
                    + [fetchers, ProfileChangeListener(
                        configuration: direct, channel: cluster.notificationChannel, hub: hub, logger: logger)])
            try background.start()
            let responder = ProfileResponder(
                lifecycle: lifecycle, authorization: try auth.authorization(), observability: observability,
                liveUpdates: hub, clientIdentity: ClientIdentity(trustedProxyHops: trustedProxyHops), logger: logger,
                profileFields: profileFields
            ) { _ in
                try ProfileWorker.connecting(databases: databases, memcached: memcached, shared: shared, logger: logger)
            }
            let server = HTTPServer(
                configuration: serverConfiguration(), responder: responder, logger: logger, eventStreams: streams)
            metrics.observe { server.statistics }
            metrics.observe(database: databaseHealth, pool: databases.primary)
            metrics.observe(memcachedNodes: memcached.servers, breaker: shared.circuitBreaker)
            do {
                _ = try server.start()
            } catch {
                background.stop(within: .seconds(5))
                throw RuntimeFailure(description: "cannot start the server on \(host):\(port): \(error)")
            }
            let signals = ShutdownSignals { signalName in
                logger.notice("draining", metadata: ["signal": "\(signalName)"])
                lifecycle.beginDraining()
                DispatchQueue(label: "profile-service.shutdown").asyncAfter(
                    deadline: .now() + .seconds(shutdownDelayS)
                ) {
                    server.shutdown()
                }
            }
            server.waitUntilStopped()
            databases.close()
            // The feed last: stopping releases the slot, and another instance takes over within a second.
            let late = background.stop(within: .seconds(5))
            if !late.isEmpty { logger.warning("stopped without waiting for", metadata: ["services": "\(late)"]) }
            signals.cancel()
            logger.notice("stopped")
            // Every line out before the process exits (atexit would too; this is the normal path).
            LogSink.standardError.flush(timeout: .seconds(2))
        }

        /// The cache-repair feed (docs/design.md §3), unless turned off; not started yet.
        private func changeFeed(
            cluster: CacheCluster, postgres: PostgresConfiguration, memcached: MemcachedConfiguration, shared: ProfileCacheShared,
            logger: Logger
        ) -> ChangeFeed? {
            guard changeFeed else {
                logger.warning(
                    """
                    change feed off (--no-change-feed): only this service's own writes update the cache; \
                    rows changed in SQL, or by an instance that died before its write-through, are served \
                    stale until their cache TTL
                    """)
                return nil
            }
            var configuration = ChangeFeedConfiguration(cluster: cluster)
            configuration.consistencySampleRate = consistencySampleRate
            configuration.consistencyCheckDelay = .milliseconds(consistencyCheckDelayMs)
            return ChangeFeed(
                configuration: configuration, postgres: postgres, memcached: memcached, shared: shared, logger: logger)
        }

        private func serverConfiguration() -> HTTPServerConfiguration {
            var configuration = HTTPServerConfiguration()
            configuration.host = host
            configuration.port = port
            configuration.workerCount = workers
            configuration.eventLoopCount = eventLoops == 0 ? nil : eventLoops
            // The lane's threads each keep one multi-get in flight: more loops feed more of them.
            configuration.batchWorkerCount = chosenBatchWorkers ?? max(4, 2 * configuration.resolvedEventLoopCount)
            configuration.queueCapacity = queueCapacity
            configuration.maxConnections = maxConnections
            configuration.maxBodyBytes = ProfileResponder.maximumRequestBodyBytes
            configuration.idleTimeout = .seconds(idleTimeoutS)
            configuration.headDeadline = .seconds(headTimeoutS)
            configuration.drainTimeout = .seconds(drainTimeoutS)
            return configuration
        }

        private func memcachedConfiguration() throws -> MemcachedConfiguration {
            do {
                return try MemcachedConfiguration(
                    servers: memcached, connectTimeout: .milliseconds(memcachedTimeoutMs),
                    // libmemcached's own per-handle skip, in whole seconds; the shared breaker
                    // (--memcached-retry-s) decides when a node is used again (docs/design.md §5).
                    pollTimeout: .milliseconds(memcachedTimeoutMs), retryTimeout: .seconds(max(1, memcachedRetryS)))
            } catch let error as MemcachedError {
                throw ValidationError("--memcached: \(error.message)")
            }
        }

        private func require(_ value: Int, in range: ClosedRange<Int>, _ flag: String) throws {
            guard range.contains(value) else {
                throw ValidationError("\(flag) must be \(range.lowerBound)…\(range.upperBound), got \(value)")
            }
        }
    }
}

/// Turns SIGTERM and SIGINT into one call of `onSignal`, on a queue of its own.
final class ShutdownSignals {
    private let sources: [any DispatchSourceSignal]

    init(onSignal: @escaping @Sendable (String) -> Void) {
        let queue = DispatchQueue(label: "profile-service.signals")
        sources = [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")].map { number, name in
            signal(number, SIG_IGN)  // let the dispatch source, not the default action, see it
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { onSignal(name) }
            source.resume()
            return source
        }
    }

    func cancel() {
        for source in sources { source.cancel() }
    }
}
