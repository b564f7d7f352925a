import Synchronization

/// Process-wide run state that the routes report, such as a drain in progress.
public final class ServiceLifecycle: Sendable {
    private let draining = Atomic<Bool>(false)
    /// The change feed's state, reported by `/readyz`.
    public let changeFeed: ChangeFeedMonitor

    /// The standbys read for misses, reported by `/readyz` (docs/design.md §8); `nil` when none.
    public let replicas: ReadReplicas?

    public init(changeFeed: ChangeFeedMonitor = ChangeFeedMonitor(enabled: false), replicas: ReadReplicas? = nil) {
        self.changeFeed = changeFeed
        self.replicas = replicas
    }

    /// True once a shutdown has begun: `/readyz` answers 503 so gateways stop sending traffic.
    public var isDraining: Bool { draining.load(ordering: .acquiring) }

    public func beginDraining() { draining.store(true, ordering: .releasing) }
}
