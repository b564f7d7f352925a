public import MemcachedClient
public import ProfileService
import Synchronization

/// A memcached cluster in memory, with the semantics the cache protocol relies on
/// (docs/design.md §2): `add` fails on an existing key, every store gives the item a new CAS
/// value, `cas` fails on a mismatch (`exists`) or a missing key (`notFound`), items expire,
/// keys are spread over nodes — and a node can be made to fail (an injected fault).
///
/// Shared by every worker of a test like the real cluster; each worker gets its own
/// ``client()``, as each gets its own connection.
public final class InMemoryCache: Sendable {
    struct Item {
        var value: [UInt8]
        var flags: UInt32
        var cas: UInt64
        var expires: ContinuousClock.Instant?
    }

    struct State {
        var items: [String: Item] = [:]
        var nextCAS: UInt64 = 1
        var failingNodes: Set<MemcachedServer> = []
    }

    public let servers: [MemcachedServer]
    private let state = Mutex(State())

    /// - Parameter nodes: how many nodes the keys are spread over (`memory-N:11211`).
    public init(nodes: Int = 2) {
        servers = (0..<max(nodes, 1)).map { MemcachedServer(host: "memory-\($0)", port: 11211) }
    }

    /// A connection to the cluster, for one worker.
    public func client() -> Client { Client(cluster: self) }

    /// Every operation on `server` fails with a timeout until ``heal(_:)``.
    public func fail(_ server: MemcachedServer) { state.withLock { _ = $0.failingNodes.insert(server) } }

    public func heal(_ server: MemcachedServer) { state.withLock { _ = $0.failingNodes.remove(server) } }

    /// The node a key lives on (a stable hash, like consistent hashing's choice for a fixed set).
    public func server(forKey key: String) -> MemcachedServer {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in key.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        return servers[Int(hash % UInt64(servers.count))]
    }

    /// The keys stored now, expired ones aside.
    public var keys: [String] {
        let now = ContinuousClock.now
        return state.withLock { state in state.items.filter { $0.value.expires.map { $0 > now } ?? true }.map(\.key) }
    }

    private func timeout(_ server: MemcachedServer) -> MemcachedError {
        MemcachedError(code: .timeout, message: "injected: \(server) does not answer", returnCode: 31, node: server)
    }

    /// Runs `body` on the live items unless the key's node fails.
    fileprivate func withNode<Result>(
        of key: String, failure: (MemcachedError) -> Result, _ body: (inout State, ContinuousClock.Instant) -> Result
    ) -> Result {
        let server = server(forKey: key)
        return state.withLock { state in
            if state.failingNodes.contains(server) { return failure(timeout(server)) }
            let now = ContinuousClock.now
            if let expires = state.items[key]?.expires, expires <= now { state.items[key] = nil }
            return body(&state, now)
        }
    }

    fileprivate static func expiry(_ seconds: Int, from now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        seconds > 0 ? now + .seconds(seconds) : nil
    }

    fileprivate func flushNode(_ server: MemcachedServer) -> MemcachedError? {
        state.withLock { state in
            if state.failingNodes.contains(server) { return timeout(server) }
            state.items = state.items.filter { self.server(forKey: $0.key) != server }
            return nil
        }
    }

    fileprivate func isFailing(_ server: MemcachedServer) -> Bool {
        state.withLock { $0.failingNodes.contains(server) }
    }

    /// One worker's view of the cluster: a ``CacheClient`` (multi-gets are the protocol's default,
    /// one lookup per key: nothing to pipeline in memory).
    public final class Client: CacheClient {
        public let cluster: InMemoryCache

        init(cluster: InMemoryCache) { self.cluster = cluster }

        public func get(_ key: String) -> MemcachedGetResult {
            cluster.withNode(of: key, failure: { .failure($0) }) { state, _ in
                guard let item = state.items[key] else { return .miss }
                return .hit(MemcachedItem(value: item.value, flags: item.flags, cas: item.cas))
            }
        }

        public func add(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedStoreResult {
            cluster.withNode(of: key, failure: { .failure($0) }) { state, now in
                guard state.items[key] == nil else { return .notStored }
                state.items[key] = Item(value: value, flags: flags, cas: state.nextCAS, expires: InMemoryCache.expiry(expiration, from: now))
                state.nextCAS += 1
                return .stored
            }
        }

        /// `set`: stores whatever is there (tests use it to plant entries behind the service's back).
        @discardableResult
        public func set(_ key: String, value: [UInt8], flags: UInt32 = 0, expiration: Int = 0) -> MemcachedStoreResult {
            cluster.withNode(of: key, failure: { .failure($0) }) { state, now in
                state.items[key] = Item(value: value, flags: flags, cas: state.nextCAS, expires: InMemoryCache.expiry(expiration, from: now))
                state.nextCAS += 1
                return .stored
            }
        }

        public func cas(_ key: String, value: [UInt8], cas: UInt64, flags: UInt32, expiration: Int) -> MemcachedStoreResult {
            cluster.withNode(of: key, failure: { .failure($0) }) { state, now in
                guard let item = state.items[key] else { return .notFound }
                guard item.cas == cas else { return .exists }
                state.items[key] = Item(value: value, flags: flags, cas: state.nextCAS, expires: InMemoryCache.expiry(expiration, from: now))
                state.nextCAS += 1
                return .stored
            }
        }

        public func delete(_ key: String) -> MemcachedDeleteResult {
            cluster.withNode(of: key, failure: { .failure($0) }) { state, _ in
                state.items.removeValue(forKey: key) == nil ? .notFound : .deleted
            }
        }

        public func server(forKey key: String) -> MemcachedServer? { cluster.server(forKey: key) }

        public func flush(server: MemcachedServer) -> MemcachedError? { cluster.flushNode(server) }

        public var servers: [MemcachedServer] { cluster.servers }

        public func ping(server: MemcachedServer) -> MemcachedError? {
            cluster.isFailing(server)
                ? MemcachedError(code: .timeout, message: "injected: \(server) does not answer", returnCode: 31, node: server)
                : nil
        }

        public func reconnect() {}

        /// Nothing to close; here so tests written for a real connection read the same.
        public func close() {}
    }
}
