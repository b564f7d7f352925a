import MemcachedClient

/// A change committed to one profile, whoever made it.
public enum ProfileChange: Sendable, Equatable {
    /// Inserted or updated to `version`; `row` is the committed row when the change carried all
    /// of it (the change feed's decoded tuple, a 409's current profile).
    case changed(id: Int64, version: Int32, row: Profile?)
    case deleted(id: Int64)

    public var id: Int64 {
        switch self {
        case .changed(let id, _, _), .deleted(let id): id
        }
    }
}

/// Refresh (docs/design.md §2.3): after a change committed elsewhere — on the change feed, a
/// 409's current row, an update whose outcome is unknown — make sure no reader is served
/// anything older from memcached. It never reads PostgreSQL: the entry is brought up to the
/// committed row when that is known and the entry is a profile, else it is deleted (always safe:
/// the next reader populates it under a lease).
extension ProfileRepository {
    public enum RefreshOutcome: String, Sendable {
        /// The entry already held this version or a newer one.
        case current
        /// The committed row replaced an older entry.
        case stored
        /// An older entry, a reader's lease or an undecodable entry was deleted.
        case invalidated
        /// No entry: the next reader populates from PostgreSQL.
        case absent
        /// memcached did not answer; the entry may still be stale.
        case failed
    }

    @discardableResult
    public func refresh(after change: ProfileChange) -> RefreshOutcome {
        refresh(after: change, lookup: nil)
    }

    /// Refreshes several changes (of different ids), reading their entries in one round trip:
    /// most are already current (their writers wrote them through), and then that is all.
    /// - Returns: each change's outcome, in order.
    public func refresh(after changes: [ProfileChange]) -> [RefreshOutcome] {
        let keys = changes.map { configuration.key(for: $0.id) }
        guard changes.count > 1, case .success(let items) = cache.get(many: keys) else {
            return changes.map { refresh(after: $0, lookup: nil) }
        }
        return zip(changes, keys).map { change, key in
            refresh(after: change, lookup: items[key].map { .hit($0) } ?? .miss)
        }
    }

    /// - Parameter lookup: the entry as read just now, if it was; else it is read first.
    func refresh(after change: ProfileChange, lookup: MemcachedGetResult?) -> RefreshOutcome {
        let key = configuration.key(for: change.id)
        guard case .changed(_, let version, let row) = change else {
            // A deletion: only an entry memcached holds needs deleting (a reader that leases after
            // this look reads the row's absence from PostgreSQL).
            if case .miss? = lookup { return .absent }
            return invalidate(key)
        }
        var lookup = lookup
        for _ in 0..<configuration.writeThroughAttempts {
            let found = lookup ?? cache.get(key)
            lookup = nil
            switch found {
            case .miss:
                return .absent
            case .failure:
                return .failed
            case .hit(let item):
                guard let cachedVersion = CacheEntry(decoding: item.value, shape: configuration.entryShape)?.version else {
                    // A lease may belong to a reader whose row predates this commit.
                    return invalidate(key)
                }
                if cachedVersion >= version { return .current }
                guard let row, row.version == version else { return invalidate(key) }
                let stored = cache.cas(
                    key, value: CacheEntry.encode(row), cas: item.cas, flags: 0,
                    expiration: configuration.jitteredTTLSeconds(using: &random))
                switch stored {
                case .stored: return .stored
                case .exists, .notFound: continue  // changed meanwhile: look again
                case .notStored, .failure: return invalidate(key)
                }
            }
        }
        return invalidate(key)
    }

    private func invalidate(_ key: String) -> RefreshOutcome {
        switch cache.delete(key) {
        case .deleted: return .invalidated
        case .notFound: return .absent
        case .failure: return .failed
        }
    }
}
