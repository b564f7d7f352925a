public import MemcachedClient

/// The memcached operations the cache protocol uses, so tests can wrap the real client and
/// inject faults. ``MemcachedConnection`` is the production conformance.
///
/// One value per worker thread, like the connection it wraps.
public protocol CacheClient: AnyObject {
    func get(_ key: String) -> MemcachedGetResult
    /// Several `gets` in one round trip: the items found by key (a key not among them is a miss).
    func get(many keys: [String]) -> Result<[String: MemcachedItem], MemcachedError>
    func add(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedStoreResult
    /// `add`, then `get` of the same key: the entry as it is after the add (see
    /// ``MemcachedConnection/addAndGet(_:value:flags:expiration:)``, which does both in one round trip).
    func addAndGet(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedGetResult
    /// ``addAndGet(_:value:flags:expiration:)`` whose answer travels while `body` runs: the entry
    /// as memcached held it at some moment before `body` returned (see
    /// ``MemcachedConnection/addAndGet(_:value:flags:expiration:around:)``, which overlaps the
    /// round trip with `body`). `body` runs exactly once, also when memcached fails.
    func addAndGet<Value, Failure: Error>(
        _ key: String, value: [UInt8], flags: UInt32, expiration: Int, around body: () throws(Failure) -> Value
    ) throws(Failure) -> (value: Value, found: MemcachedGetResult)
    func cas(_ key: String, value: [UInt8], cas: UInt64, flags: UInt32, expiration: Int) -> MemcachedStoreResult
    /// `add` of every value, then `get` of every key: the entries after the adds (see
    /// ``MemcachedConnection/addAndGet(many:flags:)``, one round trip per node).
    func addAndGet(many stores: [MemcachedStore], flags: UInt32) -> Result<[String: MemcachedItem], MemcachedError>
    /// ``addAndGet(many:flags:)`` whose answers travel while `body` runs (see
    /// ``MemcachedConnection/addAndGet(many:flags:around:)``). `body` runs exactly once, also
    /// when memcached fails.
    func addAndGet<Value, Failure: Error>(
        many stores: [MemcachedStore], flags: UInt32, around body: () throws(Failure) -> Value
    ) throws(Failure) -> (value: Value, found: Result<[String: MemcachedItem], MemcachedError>)
    /// `cas` of every value over its CAS unique, then `get` of every key: the entries after the
    /// stores, which alone tell whether each landed (see ``MemcachedConnection/casAndGet(many:flags:)``).
    func casAndGet(many stores: [MemcachedStore], flags: UInt32) -> Result<[String: MemcachedItem], MemcachedError>
    func delete(_ key: String) -> MemcachedDeleteResult
    func server(forKey key: String) -> MemcachedServer?
    func flush(server: MemcachedServer) -> MemcachedError?
    /// Every node of the cluster.
    var servers: [MemcachedServer] { get }
    /// One round trip to `server` (readiness); nil when it answered.
    func ping(server: MemcachedServer) -> MemcachedError?
    /// Drops every socket and every node's failure state, so each node is tried again.
    func reconnect()
}

extension CacheClient {
    public var servers: [MemcachedServer] { [] }
    public func ping(server: MemcachedServer) -> MemcachedError? { nil }
    public func reconnect() {}
}

extension CacheClient {
    /// One round trip per key; clients that can pipeline (``MemcachedConnection``) do it in one.
    public func get(many keys: [String]) -> Result<[String: MemcachedItem], MemcachedError> {
        var items: [String: MemcachedItem] = [:]
        for key in keys {
            switch get(key) {
            case .hit(let item): items[key] = item
            case .miss: break
            case .failure(let error): return .failure(error)
            }
        }
        return .success(items)
    }

    /// Two round trips; clients that can pipeline (``MemcachedConnection``) do it in one.
    public func addAndGet(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedGetResult {
        if case .failure(let error) = add(key, value: value, flags: flags, expiration: expiration) {
            return .failure(error)
        }
        return get(key)
    }

    /// The add and the read first, then `body`: no overlap; clients that can pipeline
    /// (``MemcachedConnection``) send both before `body` and read the answer after it.
    public func addAndGet<Value, Failure: Error>(
        _ key: String, value: [UInt8], flags: UInt32, expiration: Int, around body: () throws(Failure) -> Value
    ) throws(Failure) -> (value: Value, found: MemcachedGetResult) {
        let found = addAndGet(key, value: value, flags: flags, expiration: expiration)
        return (try body(), found)
    }

    /// One round trip per store and one multi-get; clients that can pipeline
    /// (``MemcachedConnection``) do it in one. A store's own answer is not read: the entries read
    /// back say what happened.
    public func addAndGet(many stores: [MemcachedStore], flags: UInt32) -> Result<[String: MemcachedItem], MemcachedError> {
        for store in stores { _ = add(store.key, value: store.value, flags: flags, expiration: store.expiration) }
        return get(many: stores.map(\.key))
    }

    /// The adds and the read first, then `body`: no overlap; clients that can pipeline
    /// (``MemcachedConnection``) send them before `body` and read the answers after it.
    public func addAndGet<Value, Failure: Error>(
        many stores: [MemcachedStore], flags: UInt32, around body: () throws(Failure) -> Value
    ) throws(Failure) -> (value: Value, found: Result<[String: MemcachedItem], MemcachedError>) {
        let found = addAndGet(many: stores, flags: flags)
        return (try body(), found)
    }

    /// One round trip per store and one multi-get; see ``addAndGet(many:flags:)``.
    public func casAndGet(many stores: [MemcachedStore], flags: UInt32) -> Result<[String: MemcachedItem], MemcachedError> {
        for store in stores { _ = cas(store.key, value: store.value, cas: store.cas, flags: flags, expiration: store.expiration) }
        return get(many: stores.map(\.key))
    }
}

extension MemcachedConnection: CacheClient {}
