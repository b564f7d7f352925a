import Dispatch
import MemcachedClient
import Synchronization

/// Stops calling a memcached node for a while after it failed several times in a row.
///
/// libmemcached skips a node that refuses connections by itself, but a node that hangs (or a
/// network that drops packets) costs the full poll timeout on every operation. After
/// ``failureThreshold`` consecutive failures on one node, its operations fail at once for
/// ``openDuration``; then one operation is let through to probe it.
public final class NodeCircuitBreaker: Sendable {
    public let failureThreshold: Int
    public let openDuration: Duration

    private struct NodeState {
        var consecutiveFailures = 0
        var openUntil: DispatchTime?
    }

    private let nodes = Mutex<[MemcachedServer: NodeState]>([:])
    /// Nodes with failures on record; zero on the healthy path, which then takes no lock.
    private let troubledNodes = Atomic<Int>(0)

    public init(failureThreshold: Int = 3, openDuration: Duration = .seconds(2)) {
        self.failureThreshold = failureThreshold
        self.openDuration = openDuration
    }

    var hasTroubledNodes: Bool { troubledNodes.load(ordering: .acquiring) > 0 }

    /// Whether operations on `server` should be skipped now.
    func isOpen(_ server: MemcachedServer) -> Bool {
        nodes.withLock { nodes in
            guard let openUntil = nodes[server]?.openUntil else { return false }
            if DispatchTime.now() < openUntil { return true }
            nodes[server]?.openUntil = nil  // half-open: let one operation probe the node
            return false
        }
    }

    /// Returns true when this failure opened the breaker.
    @discardableResult
    func recordFailure(_ server: MemcachedServer) -> Bool {
        nodes.withLock { nodes in
            var state = nodes[server] ?? NodeState()
            state.consecutiveFailures += 1
            let opens = state.consecutiveFailures >= failureThreshold && state.openUntil == nil
            if opens {
                state.openUntil = .after(openDuration)
            }
            nodes[server] = state
            troubledNodes.store(nodes.count, ordering: .releasing)
            return opens
        }
    }

    func recordSuccess(_ server: MemcachedServer) {
        nodes.withLock { nodes in
            guard nodes.removeValue(forKey: server) != nil else { return }
            troubledNodes.store(nodes.count, ordering: .releasing)
        }
    }
}

/// A ``CacheClient`` that consults a ``NodeCircuitBreaker`` around every operation.
final class CircuitBreakingCacheClient: CacheClient {
    private let base: any CacheClient
    private let breaker: NodeCircuitBreaker

    static let skipped = MemcachedError(
        code: .serverMarkedDead, message: "skipped: the node failed repeatedly (circuit open)", returnCode: -1)

    init(_ base: any CacheClient, breaker: NodeCircuitBreaker) {
        self.base = base
        self.breaker = breaker
    }

    /// Runs `operation` unless the key's node is skipped; books its outcome on the node.
    private func guarded<Result>(
        _ key: String, _ operation: () -> Result, failed: (Result) -> Bool, skipped: Result
    ) -> Result {
        if breaker.hasTroubledNodes, let server = base.server(forKey: key), breaker.isOpen(server) {
            return skipped
        }
        let result = operation()
        if failed(result) {
            if let server = base.server(forKey: key) { breaker.recordFailure(server) }
        } else if breaker.hasTroubledNodes, let server = base.server(forKey: key) {
            breaker.recordSuccess(server)
        }
        return result
    }

    func get(_ key: String) -> MemcachedGetResult {
        guarded(key, { base.get(key) }, failed: { if case .failure = $0 { true } else { false } }, skipped: .failure(Self.skipped))
    }

    func add(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        guarded(
            key, { base.add(key, value: value, flags: flags, expiration: expiration) },
            failed: { if case .failure = $0 { true } else { false } }, skipped: .failure(Self.skipped))
    }

    func cas(_ key: String, value: [UInt8], cas: UInt64, flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        guarded(
            key, { base.cas(key, value: value, cas: cas, flags: flags, expiration: expiration) },
            failed: { if case .failure = $0 { true } else { false } }, skipped: .failure(Self.skipped))
    }

    func delete(_ key: String) -> MemcachedDeleteResult {
        guarded(key, { base.delete(key) }, failed: { if case .failure = $0 { true } else { false } }, skipped: .failure(Self.skipped))
    }

    func server(forKey key: String) -> MemcachedServer? { base.server(forKey: key) }

    func flush(server: MemcachedServer) -> MemcachedError? {
        if breaker.isOpen(server) { return Self.skipped }
        return base.flush(server: server)
    }
}
