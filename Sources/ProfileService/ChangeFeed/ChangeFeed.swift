import Foundation
public import Logging
public import MemcachedClient
public import PostgresClient
public import ServiceRuntime
import Synchronization

/// Keeps memcached right whoever wrote a profile: it streams PostgreSQL's commit stream
/// (logical decoding, pgoutput) and refreshes every changed entry, then tells every instance
/// (NOTIFY) what changed. See docs/design.md §3.
///
/// Every instance runs one; the replication slot lets one stream at a time, so one consumes
/// and the others stand by, trying to take the slot over every ``ChangeFeedConfiguration/takeoverInterval``.
public final class ChangeFeed: BackgroundService {
    public let monitor: ChangeFeedMonitor
    /// Checks a sample of the applied changes against memcached and PostgreSQL (docs/design.md §3.8).
    public let consistency: ConsistencyObserver
    private let configuration: ChangeFeedConfiguration
    private let postgres: PostgresConfiguration
    private let memcached: MemcachedConfiguration
    private let shared: ProfileCacheShared
    private let logger: Logger
    private let stopping = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)
    private let stopped = DispatchSemaphore(value: 0)
    private let finished = Atomic<Bool>(false)

    public init(
        configuration: ChangeFeedConfiguration = .init(), postgres: PostgresConfiguration,
        memcached: MemcachedConfiguration, shared: ProfileCacheShared, logger: Logger
    ) {
        self.configuration = configuration
        self.postgres = postgres
        self.memcached = memcached
        self.shared = shared
        self.logger = logger
        self.monitor = ChangeFeedMonitor(enabled: true, cluster: configuration.cluster)
        self.consistency = ConsistencyObserver(
            sampleRate: configuration.consistencySampleRate, delay: configuration.consistencyCheckDelay, logger: logger)
    }

    /// Starts the feed on a thread of its own (it blocks in libpq and libmemcached).
    public func start() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        let (postgres, memcached, shared, logger) = (postgres, memcached, shared, logger)
        consistency.start {
            try ProfileWorker.connecting(
                postgres: postgres, databaseHealth: PostgresServerHealth(), memcached: memcached, shared: shared,
                logger: logger)
        }
        let thread = Thread { [self] in
            defer {
                finished.store(true, ordering: .releasing)
                stopped.signal()
            }
            do {
                let consumer = try ChangeFeedConsumer(
                    configuration: configuration, postgres: postgres, memcached: memcached, shared: shared,
                    monitor: monitor, consistency: consistency, stopping: { self.stopping.load(ordering: .relaxed) },
                    logger: logger)
                consumer.run()
            } catch {
                monitor.enter(.unavailable, detail: "\(error)")
                logger.error("change feed cannot start", metadata: ["error": "\(error)"])
            }
        }
        thread.name = "change-feed"
        thread.start()
    }

    public var serviceName: String { "change feed" }

    /// Stops streaming (releasing the slot for another instance) and waits for the thread until
    /// `deadline`.
    @discardableResult
    public func stop(deadline: ContinuousClock.Instant) -> Bool {
        stopping.store(true, ordering: .relaxed)
        consistency.stop()
        guard started.load(ordering: .relaxed), !finished.load(ordering: .acquiring) else { return true }
        return stopped.wait(timeout: .after(ContinuousClock.now.duration(to: deadline))) == .success
    }
}
