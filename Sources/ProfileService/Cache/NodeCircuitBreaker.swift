public import MemcachedClient
import Synchronization

/// The health of each memcached node, shared by every worker of the process.
///
/// libmemcached skips a node that refuses connections by itself, but per `memcached_st`: each
/// worker learns of a failure, and of a recovery, on its own, and a worker whose handle still
/// holds the node in its retry timeout keeps failing after the node is back. A node that hangs
/// costs the full poll timeout on every operation. This breaker decides for all workers at once
/// (docs/design.md §5):
///
/// - *closed*: operations run. ``failureThreshold`` failures in a row open it.
/// - *open*: operations on the node fail at once for ``openDuration``.
/// - *probing*: after that, exactly one operation is let through (the probe); the others keep
///   failing at once. Its success closes the breaker and counts a recovery — every worker
///   renews its memcached handle when it sees the count change, so all of them use the node
///   again on their next operation. Its failure opens the breaker for another ``openDuration``.
public final class NodeCircuitBreaker: Sendable {
    public let failureThreshold: Int
    public let openDuration: Duration
    /// A probe that has not reported within this time is presumed lost; another may start.
    public let probeTimeout: Duration
    private let now: @Sendable () -> ContinuousClock.Instant

    /// What a caller may do with a node now.
    public enum Admission: Sendable, Equatable {
        /// Closed: run the operation.
        case proceed
        /// The one probe of an open node: renew the connection, run the operation, report it.
        case probe
        /// Open, or another caller is probing: fail at once.
        case skip
    }

    /// A node's state, for readiness and tests.
    public enum State: Sendable, Equatable {
        case closed, open, probing
    }

    private enum Phase {
        case closed
        case open(until: ContinuousClock.Instant)
        case probing(until: ContinuousClock.Instant)
    }

    private struct NodeState {
        var consecutiveFailures = 0
        var phase = Phase.closed
    }

    /// What the breaker saw and did, counted since start (`profile_service_memcached_breaker_events_total`).
    public enum Event: String, CaseIterable, Sendable {
        /// An operation that reached a node failed (a timeout, a refused connection, …).
        case failed
        /// An operation was not sent: the node's breaker is open, or it failed earlier in the request.
        case skipped
        case opened
        case probed
        /// A probe succeeded and closed the breaker.
        case recovered
    }

    private let counters = EventCounters<Event>(.memcachedBreakerEvents, label: \.rawValue)

    private let nodes = Mutex<[MemcachedServer: NodeState]>([:])
    /// Nodes with failures on record; zero on the healthy path, which then takes no lock.
    private let troubledNodes = Atomic<Int>(0)
    private let recoveries = Atomic<Int>(0)

    /// - Parameters:
    ///   - failureThreshold: consecutive failures that open the breaker of a node.
    ///   - openDuration: how long an open node is skipped before one probe (`--memcached-retry-s`).
    ///   - now: the clock, for tests.
    public init(
        failureThreshold: Int = 3, openDuration: Duration = .milliseconds(500), probeTimeout: Duration = .seconds(2),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        precondition(failureThreshold >= 1, "failureThreshold must be at least 1")
        self.failureThreshold = failureThreshold
        self.openDuration = openDuration
        self.probeTimeout = probeTimeout
        self.now = now
    }

    /// How many times a node came back (a probe succeeded) since start. A worker that saw another
    /// value last renews its memcached handle: libmemcached may still hold the node in timeout.
    public var recoveryCount: Int { recoveries.load(ordering: .acquiring) }

    var hasTroubledNodes: Bool { troubledNodes.load(ordering: .acquiring) > 0 }

    /// How many times `event` happened since start.
    public func count(_ event: Event) -> Int {
        counters.count(event)
    }

    func record(_ event: Event) {
        counters.record(event)
    }

    /// Whether `server` may be used now; at most one caller at a time is told to probe.
    public func admit(_ server: MemcachedServer) -> Admission {
        guard hasTroubledNodes else { return .proceed }
        let admission = nodes.withLock { nodes -> Admission in
            guard let state = nodes[server] else { return .proceed }
            let now = self.now()
            switch state.phase {
            case .closed:
                return .proceed
            case .open(let until), .probing(let until):
                guard now >= until else { return .skip }
                nodes[server]?.phase = .probing(until: now + probeTimeout)
                return .probe
            }
        }
        switch admission {
        case .skip: record(.skipped)
        case .probe: record(.probed)
        case .proceed: break
        }
        return admission
    }

    /// The node's state, without changing it.
    public func state(of server: MemcachedServer) -> State {
        guard hasTroubledNodes else { return .closed }
        return nodes.withLock { nodes in
            switch nodes[server]?.phase {
            case nil, .closed?: .closed
            case .open?: .open
            case .probing?: .probing
            }
        }
    }

    /// Whether operations on `server` are skipped (open or being probed by another caller).
    public func isOpen(_ server: MemcachedServer) -> Bool { state(of: server) != .closed }

    /// Books a failed operation. Returns true when this failure opened the breaker.
    @discardableResult
    public func recordFailure(_ server: MemcachedServer, probe: Bool = false) -> Bool {
        nodes.withLock { nodes in
            var state = nodes[server] ?? NodeState()
            var opened = false
            switch state.phase {
            case .closed:
                state.consecutiveFailures += 1
                if state.consecutiveFailures >= failureThreshold {
                    state.phase = .open(until: now() + openDuration)
                    opened = true
                }
            case .probing where probe:
                state.phase = .open(until: now() + openDuration)
            case .open, .probing:
                break  // an operation admitted before the breaker opened: already counted
            }
            nodes[server] = state
            troubledNodes.store(nodes.count, ordering: .releasing)
            record(.failed)
            if opened { record(.opened) }
            return opened
        }
    }

    /// Books a successful operation. A probe's success closes the breaker and returns the new
    /// ``recoveryCount``; otherwise returns nil.
    @discardableResult
    public func recordSuccess(_ server: MemcachedServer, probe: Bool = false) -> Int? {
        guard hasTroubledNodes else { return nil }
        return nodes.withLock { nodes -> Int? in
            guard let state = nodes[server] else { return nil }
            switch state.phase {
            case .closed:
                nodes[server] = nil
                troubledNodes.store(nodes.count, ordering: .releasing)
                return nil
            case .probing where probe:
                nodes[server] = nil
                troubledNodes.store(nodes.count, ordering: .releasing)
                record(.recovered)
                return recoveries.add(1, ordering: .acquiringAndReleasing).newValue
            case .open, .probing:
                return nil  // admitted before the breaker opened; the probe decides
            }
        }
    }
}
