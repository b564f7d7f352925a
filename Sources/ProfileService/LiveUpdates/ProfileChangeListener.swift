import Foundation
public import Logging
public import PostgresClient
public import ServiceRuntime
import Synchronization

/// Feeds the ``ProfileUpdateHub`` with the changes committed anywhere: a thread of its own with its
/// own PostgreSQL session, `LISTEN` on its cache cluster's channel (docs/design.md §4).
///
/// The change feed's active consumer notifies after it has applied a batch to memcached, with
/// `<id>:<version>` pairs (``ProfileChangePayload``). `LISTEN`/`NOTIFY` is at-most-once: whatever
/// is sent while this session is down is lost. So after every (re)connect — once `LISTEN` holds
/// again — the hub resynchronises every followed profile. A lost session is retried with a
/// backoff of 50 ms doubling to 2 s.
public final class ProfileChangeListener: BackgroundService {
    private let configuration: PostgresConfiguration
    private let channel: String
    private let hub: ProfileUpdateHub
    private let logger: Logger
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)

    /// - Parameter channel: the cache cluster's channel (``CacheCluster/notificationChannel``):
    ///   its consumer notifies once that cluster holds the changes.
    public init(
        configuration: PostgresConfiguration, channel: String = CacheCluster.default.notificationChannel,
        hub: ProfileUpdateHub, logger: Logger
    ) {
        self.configuration = configuration
        self.channel = channel
        self.hub = hub
        self.logger = logger
    }

    /// Starts the listener thread.
    public func start() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = "live-updates-listen"
        thread.start()
    }

    public var serviceName: String { "live-update listener" }

    /// Stops the thread (it notices within one wait, 250 ms) and waits for it until `deadline`.
    @discardableResult
    public func stop(deadline: ContinuousClock.Instant) -> Bool {
        guard started.load(ordering: .relaxed), !stopped.exchange(true, ordering: .relaxed) else { return true }
        return finished.wait(timeout: .after(ContinuousClock.now.duration(to: deadline))) == .success
    }

    private func run() {
        let connection = PostgresConnection(configuration: configuration, statements: [], logger: logger)
        defer { connection.close() }
        var listening = false
        var delay = Duration.milliseconds(50)
        while !stopped.load(ordering: .relaxed) {
            do {
                if !listening {
                    try connection.listen(on: channel)
                    listening = true
                    delay = .milliseconds(50)
                    logger.info("listening for profile changes", metadata: ["channel": "\(channel)"])
                    hub.resynchronize()
                }
                for notification in try connection.waitForNotifications(timeout: .milliseconds(250))
                where notification.channel == channel {
                    if notification.payload == ProfileChangePayload.resynchronizeAll {
                        hub.resynchronize()
                        continue
                    }
                    for change in ProfileChangePayload.parse(notification.payload) {
                        hub.publish(id: change.id, version: change.version)
                    }
                }
            } catch {
                if listening {
                    logger.warning("profile change listener lost PostgreSQL; reconnecting", metadata: ["error": "\(error)"])
                }
                listening = false
                sleepThread(for: delay) { stopped.load(ordering: .relaxed) }
                delay = min(delay * 2, .seconds(2))
            }
        }
    }
}
