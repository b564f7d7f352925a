public import MemcachedClient
public import ProfileService

/// A cache whose stores always lose (CAS conflicts, adds that find a key): drives a
/// write-through into its delete path without touching anything else.
public final class ConflictingCache: CacheClient {
    public let base: any CacheClient

    public init(_ base: any CacheClient) { self.base = base }

    public func get(_ key: String) -> MemcachedGetResult { base.get(key) }
    public func add(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedStoreResult { .notStored }
    public func cas(_ key: String, value: [UInt8], cas: UInt64, flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        .exists
    }
    public func delete(_ key: String) -> MemcachedDeleteResult { base.delete(key) }
    public func server(forKey key: String) -> MemcachedServer? { base.server(forKey: key) }
    public func flush(server: MemcachedServer) -> MemcachedError? { base.flush(server: server) }
}
