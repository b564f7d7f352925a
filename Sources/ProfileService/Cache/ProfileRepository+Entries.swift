import Logging
import MemcachedClient

/// The memcached operations of the cache protocol (docs/design.md §2), each written once for any
/// number of keys: one key is one command, several keys go in one round trip per node. Every
/// step of the protocol — read, load, read past, settle, write-through, refresh — is made of
/// these, so a batch of one and a batch of many keep the same rules.
extension ProfileRepository {
    /// What one look at a key found, decoded once.
    public struct Look {
        let found: MemcachedGetResult
        /// The entry in this repository's shape; nil for a miss, a failure or an entry it does not
        /// decode (another format or shape).
        let entry: CacheEntry?

        init(_ found: MemcachedGetResult, shape: UInt32) {
            self.found = found
            if case .hit(let item) = found { entry = CacheEntry(decoding: item.value, shape: shape) } else { entry = nil }
        }

        /// The CAS value of what the key held (nil: nothing, or memcached failed).
        var cas: UInt64? {
            if case .hit(let item) = found { item.cas } else { nil }
        }

        /// The version the entry stands for: a profile's, 0 for a record of absence; nil for a
        /// lease, an undecodable entry, a miss or a failure.
        var cachedVersion: Int32? { entry?.version }

        /// The CAS value of the lease carrying `token`, when that is what the key holds: the one
        /// place that decides whether a lease is the looker's own.
        func ownLeaseCAS(token: UInt64?) -> UInt64? {
            guard let token, case .lease(let found)? = entry, found == token else { return nil }
            return cas
        }
    }

    /// Looks at `keys`, in their order: one `gets`, or one multi-get for several. When a multi-get
    /// fails, the keys of the node it names have had their one wait (§5.1) and fail; the others
    /// are looked at one by one, through the circuit breaker.
    func look(_ keys: [String]) -> [Look] {
        let shape = configuration.entryShape
        guard keys.count > 1 else { return keys.map { Look(cache.get($0), shape: shape) } }
        switch cache.get(many: keys) {
        case .success(let items):
            return keys.map { Look(items[$0].map { .hit($0) } ?? .miss, shape: shape) }
        case .failure(let error):
            return keys.map { key in
                let failed = error.node != nil && cache.server(forKey: key) == error.node
                return Look(failed ? .failure(error) : cache.get(key), shape: shape)
            }
        }
    }

    /// A new lease for `key` (docs/design.md §2.1): a random token, and the entry that holds it
    /// for the lease's lifetime. Every lease the repository takes is made here.
    func newLease(for key: String) -> (token: UInt64, entry: MemcachedStore) {
        let token = UInt64.random(in: 1...UInt64.max, using: &random)
        let entry = MemcachedStore(
            key: key, value: CacheEntry.encodeLease(token: token), expiration: configuration.leaseTTLSeconds)
        return (token, entry)
    }

    /// A lease put down by ``putLeases(_:)``: what the key holds after the attempt.
    struct LeaseAttempt {
        /// The token of the lease sent (nil: none was sent, the replaced entry had changed).
        var token: UInt64?
        /// The key as read back after the attempt.
        var look: Look?

        /// The CAS value of the lease, when it is this reader's.
        var ownCAS: UInt64? { look?.ownLeaseCAS(token: token) }
        /// The CAS value of another reader's lease (or an undecodable entry) read back instead: a
        /// row read after it may be stored over it (§2.9).
        var othersCAS: UInt64? {
            guard ownCAS == nil, let look, case .hit(let item) = look.found, look.cachedVersion == nil else { return nil }
            return item.cas
        }
        /// The version of a profile entry (0: a record of absence) read back instead.
        var cachedVersion: Int32? { look?.cachedVersion }
    }

    /// Puts a lease down on each key — `add`ed where the key is free, or `cas`ed over the entry
    /// whose CAS value is given (one that does not decode) — and reads every key back in the same
    /// round trip: neither `add` nor `cas` returns the new CAS value, and the token read back says
    /// whose lease is there. One key is one pipelined `add` and `get`; several go in one round trip
    /// per node, or — when that fails (a node troubled) — one at a time through the circuit breaker.
    func putLeases(_ keys: [(key: String, replacingCAS: UInt64?)]) -> [LeaseAttempt] {
        let shape = configuration.entryShape
        let leases = keys.map { newLease(for: $0.key) }
        if keys.count > 1, keys.allSatisfy({ $0.replacingCAS == nil }),
            case .success(let items) = cache.addAndGet(many: leases.map(\.entry), flags: 0)
        {
            return leases.map { lease in
                LeaseAttempt(token: lease.token, look: Look(items[lease.entry.key].map { .hit($0) } ?? .miss, shape: shape))
            }
        }
        return zip(keys, leases).map { key, lease in
            let entry = lease.entry
            guard let replacingCAS = key.replacingCAS else {
                let found = cache.addAndGet(entry.key, value: entry.value, flags: 0, expiration: entry.expiration)
                return LeaseAttempt(token: lease.token, look: Look(found, shape: shape))
            }
            guard case .stored = cache.cas(entry.key, value: entry.value, cas: replacingCAS, flags: 0, expiration: entry.expiration)
            else { return LeaseAttempt() }
            return LeaseAttempt(token: lease.token, look: Look(cache.get(entry.key), shape: shape))
        }
    }

    /// An entry's bytes stored over the CAS value `cas` for the entry TTL, jittered (§2.4): every
    /// populate, write-through, settle and refresh stores through here.
    func entryStore(_ value: [UInt8], key: String, over cas: UInt64) -> MemcachedStore {
        MemcachedStore(key: key, value: value, expiration: configuration.jitteredTTLSeconds(using: &random), cas: cas)
    }

    /// What a store of ``storeConfirming(_:)`` came to.
    enum Confirmation {
        /// It landed: the key holds its bytes.
        case landed
        /// It did not land (the key changed since its CAS value was read, or emptied); `readBack`
        /// is the key after it when that was read in the same round trip (nil: look again).
        case lost(readBack: MemcachedGetResult?)
        /// memcached did not answer: whether it landed is unknown.
        case failed
    }

    /// Sends `stores` (`cas`es) and says of each, in their order, whether it landed. One store is
    /// one `cas`, whose answer says it. Several go with `noreply` in one round trip per node with
    /// a multi-get that reads every key back: a store landed exactly when the bytes read back are
    /// the bytes it stored — no other write can leave those bytes there, since a version names one
    /// content (§2.5). When that round trip fails, each store is sent alone, through the circuit
    /// breaker (one that did land then reads as lost: its key is settled or looked at again,
    /// which is always safe).
    func storeConfirming(_ stores: [MemcachedStore]) -> [Confirmation] {
        guard stores.count > 1 else {
            return stores.map { store in
                switch cache.cas(store.key, value: store.value, cas: store.cas, flags: 0, expiration: store.expiration) {
                case .stored: return .landed
                case .notFound: return .lost(readBack: .miss)
                case .exists, .notStored: return .lost(readBack: nil)
                case .failure(let error):
                    statistics.record(.error)
                    logger.debug("cache store failed", metadata: ["error": "\(error)"])
                    return .failed
                }
            }
        }
        switch cache.casAndGet(many: stores, flags: 0) {
        case .success(let readBack):
            return stores.map { store in
                let item = readBack[store.key]
                return item?.value == store.value ? .landed : .lost(readBack: item.map { .hit($0) } ?? .miss)
            }
        case .failure(let error):
            statistics.record(.error)
            logger.debug("cache stores failed", metadata: ["error": "\(error)"])
            return stores.flatMap { storeConfirming([$0]) }
        }
    }

    /// Deletes `keys`, in their order. Deleting is always safe: at worst the next reader misses,
    /// and a lease deleted makes its reader's late populate fail.
    @discardableResult
    func forget(_ keys: [String]) -> [MemcachedDeleteResult] {
        keys.map { cache.delete($0) }
    }
}
