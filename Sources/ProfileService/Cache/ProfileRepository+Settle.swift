import MemcachedClient

/// Monotonic reads (docs/design.md §2.9): a row read from PostgreSQL is answered only once
/// memcached can no longer come to hold anything older.
///
/// A hit is never the problem — a cached entry only grows while it lives. The danger is a row
/// answered from PostgreSQL while the key holds a *lease*: its reader may have read an older row
/// before the commit, and its populate would land afterwards, so the next read would be a hit on
/// a version older than one already answered. A reader that populated its own lease has nothing to
/// do; every other answer from PostgreSQL settles the key first:
///
/// - the lease (or undecodable entry) the reader saw before its read: the row is stored over it
///   with `cas` — safe, since the row was read after that look, and any newer answer since would
///   have changed the key (every answer passes through here, every write through its write-through);
/// - a profile entry (or record of absence) older than the row: replaced with `cas`, as a
///   write-through replaces one;
/// - a lease found only now: deleted — it may have been taken before the commit, and no row read
///   earlier may be stored over it (the "absent → add" race); its reader's populate then fails;
/// - an equal or newer entry, or no entry: nothing (the next reader leases after this look).
extension ProfileRepository {
    /// A row read from PostgreSQL, to be answered once its key is settled.
    struct Settlement {
        let id: Int64
        let key: String
        /// The row (`nil`: no such profile, version 0 as in §2.6).
        let row: Profile?
        /// The CAS value of a lease or undecodable entry the reader looked at before its
        /// PostgreSQL read, which the row may replace.
        let seenCAS: UInt64?
        /// The key as read after the PostgreSQL read, when it was (a populate's round trip read it
        /// back); else it is read here.
        var lookup: MemcachedGetResult?
    }

    /// Settles the key of each settlement before its row is answered: first every row over the
    /// lease its reader saw (one round trip), then each key that did not take it, as a refresh to
    /// the row's version (§2.3).
    func settle(_ settlements: [Settlement]) {
        guard !settlements.isEmpty else { return }
        var refreshing: [(change: ProfileChange, lookup: MemcachedGetResult?)] = []
        let overSeen = settlements.filter { $0.seenCAS != nil }
        let stores = overSeen.map { settlement in
            entryStore(settlement.row.map(CacheEntry.encode) ?? CacheEntry.encodedAbsent, key: settlement.key, over: settlement.seenCAS!)
        }
        for (settlement, confirmation) in zip(overSeen, storeConfirming(stores)) {
            switch confirmation {
            case .landed: statistics.record(.settleStored)
            case .failed: break  // memcached does not answer
            case .lost(let readBack): refreshing.append((settlement.change, readBack))  // changed since the look
            }
        }
        for settlement in settlements where settlement.seenCAS == nil { refreshing.append((settlement.change, settlement.lookup)) }
        for outcome in refresh(refreshing) {
            switch outcome {
            case .stored: statistics.record(.settleStored)
            case .invalidated: statistics.record(.settleInvalidated)
            case .current, .absent, .failed: break
            }
        }
    }

    /// The profile as PostgreSQL has it, past the cache, settled before it is returned: what a
    /// caller answers or publishes from it, memcached can no longer serve older (docs/design.md §2.9).
    public func settledRow(id: Int64) throws(ProfileStoreError) -> Profile? {
        let row = try store.profile(id: id)
        settle([Settlement(id: id, key: configuration.key(for: id), row: row, seenCAS: nil)])
        return row
    }
}

extension ProfileRepository.Settlement {
    /// The change the row stands for: a refresh to its version brings the key up to it.
    var change: ProfileChange { .changed(id: id, version: row?.version ?? 0, row: row) }
}
