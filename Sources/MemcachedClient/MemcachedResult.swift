/// The outcome of ``MemcachedConnection/get(_:)``.
///
/// A plain enum on purpose: callers switch over every outcome.
public enum MemcachedGetResult: Sendable, Equatable {
    /// The key exists: value, flags and CAS unique.
    case hit(MemcachedItem)
    /// The key does not exist (or expired).
    case miss
    /// The request did not complete; the cache state is unknown.
    case failure(MemcachedError)
}

/// The outcome of ``MemcachedConnection/set(_:value:flags:expiration:)``,
/// ``MemcachedConnection/add(_:value:flags:expiration:)`` and
/// ``MemcachedConnection/cas(_:value:cas:flags:expiration:)``.
public enum MemcachedStoreResult: Sendable, Equatable {
    /// The server stored the value (`STORED`).
    case stored
    /// `add` on a key that already exists (`NOT_STORED`, `MEMCACHED_NOTSTORED`).
    case notStored
    /// `cas` on a key changed since it was read (`EXISTS`, `MEMCACHED_DATA_EXISTS`).
    case exists
    /// `cas` on a key that no longer exists (`NOT_FOUND`, `MEMCACHED_NOTFOUND`).
    case notFound
    /// The request did not complete; the cache state is unknown.
    case failure(MemcachedError)
}

/// The outcome of ``MemcachedConnection/delete(_:)``.
public enum MemcachedDeleteResult: Sendable, Equatable {
    /// The key existed and was deleted (`DELETED`).
    case deleted
    /// The key did not exist (`NOT_FOUND`).
    case notFound
    /// The request did not complete; the cache state is unknown.
    case failure(MemcachedError)
}
