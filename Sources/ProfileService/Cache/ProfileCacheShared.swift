/// The cache protocol's process-wide state, shared by every worker's ``ProfileRepository``.
public final class ProfileCacheShared: Sendable {
    public let configuration: ProfileCacheConfiguration
    public let statistics = CacheStatistics()
    public let hooks: ProfileCacheHooks
    /// Skips memcached nodes that keep failing; wraps every worker's cache client.
    public let circuitBreaker: NodeCircuitBreaker
    let inFlight = InFlightReads()
    /// The profile each handle was last answered with in this process (docs/design.md §12.2).
    let handleHints = HandleHints()
    /// The primary's WAL positions that standby reads are proved against (docs/design.md §8).
    let primaryPositions = PrimaryPositions()
    /// Readers that may wait for others' reads at once (docs/design.md §5).
    let coalescedWaitSlots: CoalescedWaitSlots

    public init(
        configuration: ProfileCacheConfiguration = .init(), hooks: ProfileCacheHooks = .init(),
        circuitBreaker: NodeCircuitBreaker = NodeCircuitBreaker()
    ) {
        self.configuration = configuration
        self.coalescedWaitSlots = CoalescedWaitSlots(limit: configuration.maximumCoalescedWaiters)
        self.hooks = hooks
        self.circuitBreaker = circuitBreaker
    }
}
