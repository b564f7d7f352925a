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
    /// Settles `key` for an answer of `row` (`nil`: no such profile, version 0 as in §2.6).
    ///
    /// - Parameters:
    ///   - seenCAS: the CAS value of a lease or undecodable entry this reader looked at before its
    ///     PostgreSQL read, which the row may replace.
    ///   - lookup: the key as read after the PostgreSQL read, when it was (a batch's populates read
    ///     back); else it is read here.
    func settle(answering row: Profile?, id: Int64, key: String, seenCAS: UInt64?, lookup: MemcachedGetResult? = nil) {
        if let seenCAS {
            let value = row.map(CacheEntry.encode) ?? CacheEntry.encodedAbsent
            switch store(value, key: key, overLease: seenCAS) {
            case .stored:
                statistics.record(.settleStored)
                return
            case .gone, .failed: return  // nothing there now, or memcached does not answer
            case .lost: break  // changed since the look: look again
            }
        }
        switch refresh(after: .changed(id: id, version: row?.version ?? 0, row: row), lookup: lookup) {
        case .stored: statistics.record(.settleStored)
        case .invalidated: statistics.record(.settleInvalidated)
        case .current, .absent, .failed: break
        }
    }

    /// ``settle(answering:id:key:seenCAS:)`` for a row read from PostgreSQL outside the read path
    /// (the live updates' fetch of a change): nothing of the key was seen before the read.
    func settle(answering row: Profile?, id: Int64) {
        settle(answering: row, id: id, key: configuration.key(for: id), seenCAS: nil)
    }

    /// The profile as PostgreSQL has it, past the cache, settled before it is returned: what a
    /// caller answers or publishes from it, memcached can no longer serve older (docs/design.md §2.9).
    public func settledRow(id: Int64) throws(ProfileStoreError) -> Profile? {
        let row = try store.profile(id: id)
        settle(answering: row, id: id)
        return row
    }

    /// ``settle(answering:id:key:seenCAS:)`` for a load that could not put its lease down. When
    /// the key held a profile entry at the row's version or above before the read, nothing is
    /// needed: from then on the key only grows, or empties and is filled by a reader whose lease
    /// went down later, so whose row is at least as new.
    func settle(answering row: Profile?, id: Int64, key: String, lease: LeaseAttempt) {
        if let cachedVersion = lease.cachedVersion, cachedVersion >= row?.version ?? 0 { return }
        settle(answering: row, id: id, key: key, seenCAS: lease.othersCAS)
    }

    /// ``settle(answering:id:key:seenCAS:)`` for what a load's populate came to: nothing to do when
    /// it landed, or found the key empty (`gone`: a later reader leases after that, so reads after
    /// it); a failed one cannot be settled from here either.
    func settle(answering row: Profile?, id: Int64, key: String, populate: PopulateOutcome) {
        switch populate {
        case .stored, .gone, .failed: return
        case .lost: settle(answering: row, id: id, key: key, seenCAS: nil)
        }
    }
}
