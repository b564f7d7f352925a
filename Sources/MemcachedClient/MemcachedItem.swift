/// A value read from memcached, copied out of libmemcached's result buffer.
///
/// Related libmemcached documentation:
/// <https://awesomized.github.io/libmemcached/libmemcached/memcached_result_st.html>
public struct MemcachedItem: Sendable, Equatable {
    /// The stored bytes (may contain zero bytes; may be empty).
    public let value: [UInt8]
    /// The 32-bit flags stored with the value.
    public let flags: UInt32
    /// The CAS unique of this version of the item, to pass to ``MemcachedConnection/cas(_:value:cas:flags:expiration:)``.
    public let cas: UInt64

    public init(value: [UInt8], flags: UInt32, cas: UInt64) {
        self.value = value
        self.flags = flags
        self.cas = cas
    }
}

/// One value of a pipelined store (``MemcachedConnection/addAndGet(many:flags:)``,
/// ``MemcachedConnection/casAndGet(many:flags:)``).
public struct MemcachedStore: Sendable, Equatable {
    public var key: String
    public var value: [UInt8]
    /// Seconds to live (memcached relative TTL); 0 for no expiry.
    public var expiration: Int
    /// The CAS unique a `cas` stores over; unused by `add`.
    public var cas: UInt64

    public init(key: String, value: [UInt8], expiration: Int, cas: UInt64 = 0) {
        self.key = key
        self.value = value
        self.expiration = expiration
        self.cas = cas
    }
}
