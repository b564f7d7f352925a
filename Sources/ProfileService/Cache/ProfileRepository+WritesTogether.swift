import Logging
import MemcachedClient

/// Writes made together (docs/design.md §9.5): the updates of several requests in
/// one statement, their write-through's first looks in one round trip beside it, and their
/// `cas`es in one more — each id still under the rules of a single write-through (§2.2).
extension ProfileRepository {
    /// What a write made together came to, for the request that asked for it.
    public struct WrittenTogether {
        let write: ProfileUpdate
        let outcome: Result<Profile, ProfileStoreError>
        /// The first look at the entry, taken beside the statement; nil once the batch used it,
        /// or when the batch's round trip failed (a node troubled: what each key holds is unknown).
        var look: EntryLook?
        /// Whether the cache holds the new version (or a newer one) already; if not, the
        /// request's write-through goes on alone, from `look` or from a look of its own.
        var writtenThrough = false

        /// Whether this is what `write` made: a request whose write is another (a second write of
        /// the id in the batch) makes its own.
        public func made(_ write: ProfileUpdate) -> Bool { self.write == write }
    }

    /// Makes `writes` together, for each request to be answered from its own write's outcome
    /// (``update(_:madeTogether:)``, after ``WrittenTogether/made(_:)`` says it is that write).
    ///
    /// - Returns: what each write made here came to, by id: the first write of each id in
    ///   `writes`, when it changed its row. A write not among them — a second write of an id, or
    ///   one that changed nothing (its row gone or changed since, or the statement refused) — is
    ///   made alone by its request, which tells a conflict from a deletion as ever.
    public func writeTogether(_ writes: [ProfileUpdate]) -> [Int64: WrittenTogether] {
        writes.count > 1 ? writeTogether(distinct: writes) : [:]
    }

    /// The writes made in one statement, by id.
    private func writeTogether(distinct requested: [ProfileUpdate]) -> [Int64: WrittenTogether] {
        // One write per id (another for the same id goes alone, after), in id order, the order
        // the statement locks rows in (it skips rows locked elsewhere, so it never waits anyway).
        var seen = Set<Int64>()
        let writes = requested.filter { seen.insert($0.id).inserted }.sorted { $0.id < $1.id }
        guard writes.count > 1 else { return [:] }
        var writtenTogether: [Int64: WrittenTogether] = [:]
        cache.beginRequest()
        let keys = writes.map { configuration.key(for: $0.id) }
        let newLeases = keys.map { newLease(for: $0) }
        let tokens = newLeases.map(\.token)
        let leases = newLeases.map(\.entry)
        // The looks go out before the statement and are read after it, as a single write's (§2.2).
        statistics.record(.databaseBatchWrite)
        let sent = cache.addAndGet(many: leases, flags: 0) { () -> Swift.Result<[Int64: Profile]?, ProfileStoreError> in
            Swift.Result { () throws(ProfileStoreError) in try store.updateProfiles(writes) }
        }
        // A failed round trip says nothing of any key, not even of a healthy node's (where the
        // add may have landed): each request's write-through looks again alone.
        let looks = zip(keys, tokens).map { key, token -> EntryLook? in
            guard case .success(let items) = sent.found else { return nil }
            return EntryLook(key: key, found: items[key].map { .hit($0) } ?? .miss, leaseToken: token)
        }
        let updated: [Int64: Profile]
        switch sent.value {
        case .success(let rows?):
            updated = rows
        case .success(nil):
            // Refused, nothing changed: each request writes alone.
            for case let look? in looks { releaseLease(of: look) }
            return [:]
        case .failure(let error):
            // Unknown outcome or no database: each request answers as a single write's would.
            for (write, look) in zip(writes, looks) {
                writtenTogether[write.id] = WrittenTogether(write: write, outcome: .failure(error), look: look)
            }
            return writtenTogether
        }
        for (write, look) in zip(writes, looks) {
            guard let profile = updated[write.id] else {
                // Changed since, gone, or its row locked elsewhere: the request's own write
                // tells which (and waits for the lock, as any single write does).
                if let look { releaseLease(of: look) }
                continue
            }
            writtenTogether[write.id] = WrittenTogether(write: write, outcome: .success(profile), look: look)
        }
        writeThroughTogether(&writtenTogether)
        return writtenTogether
    }

    /// The first step of ``writeThrough(_:look:)`` for every write made together, in one round
    /// trip: each `cas` over the entry its look found older (or over the writer's own lease, with
    /// the row read again after it, in one query) is sent with `noreply` and every key read back;
    /// a `cas` landed exactly when the bytes read back are the bytes it stored (a version names
    /// one content, §2.5). What this does not settle — a newer entry is left alone; another
    /// reader's lease, an empty slot, a store that did not land — each request's write-through
    /// settles alone.
    private func writeThroughTogether(_ writtenTogether: inout [Int64: WrittenTogether]) {
        var overEntries: [Int64: UInt64] = [:]
        var overOwnLeases: [Int64: UInt64] = [:]
        for (id, written) in writtenTogether {
            guard case .success(let profile) = written.outcome, let look = written.look else { continue }
            switch WriteThroughStep(writing: profile.version, found: look.found, ownLeaseCAS: look.ownLeaseCAS, shape: configuration.entryShape) {
            case .leave:
                statistics.record(.writeThroughSkippedNewer)
                writtenTogether[id]?.writtenThrough = true
            case .replace(let cas): overEntries[id] = cas
            case .repopulate(_, let heldLeaseCAS?): overOwnLeases[id] = heldLeaseCAS
            case .repopulate(_, nil), .giveUp: break  // alone
            }
        }
        // A lease put down before the statement may have landed after the commit: the row is
        // read again after it, as a reader's would be (§2.2).
        var rows: [Int64: Profile] = [:]
        if !overOwnLeases.isEmpty {
            statistics.record(.databaseRead)
            do {
                rows = try store.profiles(ids: Array(overOwnLeases.keys))
            } catch {
                // As a single write-through whose row read fails: the key is deleted (always safe:
                // at worst the next reader misses), and that settles it.
                for id in overOwnLeases.keys {
                    _ = cache.delete(configuration.key(for: id))
                    statistics.record(.writeThroughDeleted)
                    writtenTogether[id]?.writtenThrough = true
                }
                overOwnLeases = [:]
            }
        }
        var stores: [(id: Int64, store: MemcachedStore)] = []
        for (id, cas) in overEntries {
            guard let written = writtenTogether[id], case .success(let profile) = written.outcome, let look = written.look
            else { continue }
            stores.append((id, store(profile, key: look.key, cas: cas)))
            writtenTogether[id]?.look = nil
        }
        for (id, leaseCAS) in overOwnLeases {
            guard let look = writtenTogether[id]?.look else { continue }
            writtenTogether[id]?.look = nil
            guard let row = rows[id] else {
                _ = cache.delete(look.key)
                continue
            }
            stores.append((id, store(row, key: look.key, cas: leaseCAS)))
        }
        guard !stores.isEmpty else { return }
        switch storeConfirming(stores.map(\.store)) {
        case .success(let confirmations):
            for ((id, _), confirmation) in zip(stores, confirmations) {
                if confirmation.landed {
                    statistics.record(.writeThroughStored)
                    writtenTogether[id]?.writtenThrough = true
                } else {
                    statistics.record(.writeThroughCASConflict)
                }
            }
        case .failure(let error):
            // Whether any landed is unknown: each looks afresh alone, which is always safe.
            statistics.record(.error)
            logger.debug("cache write-throughs failed", metadata: ["error": "\(error)"])
        }
    }

    private func store(_ profile: Profile, key: String, cas: UInt64) -> MemcachedStore {
        MemcachedStore(
            key: key, value: CacheEntry.encode(profile), expiration: configuration.jitteredTTLSeconds(using: &random), cas: cas)
    }
}
