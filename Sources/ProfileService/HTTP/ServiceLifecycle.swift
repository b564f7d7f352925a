public import PostgresClient
import Synchronization

/// Process-wide run state that the routes report, such as a drain in progress.
public final class ServiceLifecycle: Sendable {
    private let draining = Atomic<Bool>(false)
    /// The change feed's state, reported by `/readyz`.
    public let changeFeed: ChangeFeedMonitor

    /// The standbys read for misses, reported by `/readyz` (docs/design.md §8); `nil` when none.
    public let replicas: ReadReplicas?

    /// The primary's health, whose reason for being down `/readyz` reports; `nil` in tests
    /// without a server.
    public let databaseHealth: PostgresServerHealth?

    public init(
        changeFeed: ChangeFeedMonitor = ChangeFeedMonitor(enabled: false), replicas: ReadReplicas? = nil,
        databaseHealth: PostgresServerHealth? = nil
    ) {
        self.changeFeed = changeFeed
        self.replicas = replicas
        self.databaseHealth = databaseHealth
    }

    /// True once a shutdown has begun: `/readyz` answers 503 so gateways stop sending traffic.
    public var isDraining: Bool { draining.load(ordering: .acquiring) }

    public func beginDraining() { draining.store(true, ordering: .releasing) }
}
