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
        refresh([(change, nil)])[0]
    }

    /// Refreshes several changes (of different ids), reading their entries in one round trip:
    /// most are already current (their writers wrote them through), and then that is all.
    /// - Returns: each change's outcome, in order.
    public func refresh(after changes: [ProfileChange]) -> [RefreshOutcome] {
        refresh(changes.map { ($0, nil) })
    }

    /// Refreshes each change — from `lookup`, the entry as read just now, when given; else from a
    /// look of its own (one round trip for the batch) — and returns each one's outcome, in order.
    /// The committed row replaces an older profile entry with `cas` (a conflict looks again, up to
    /// ``ProfileCacheConfiguration/writeThroughAttempts`` times); anything else older is deleted.
    @discardableResult
    func refresh(_ changes: [(change: ProfileChange, lookup: MemcachedGetResult?)]) -> [RefreshOutcome] {
        var outcomes = [RefreshOutcome?](repeating: nil, count: changes.count)
        let keys = changes.map { configuration.key(for: $0.change.id) }
        var lookups = changes.map(\.lookup)
        var invalidating: [Int] = []
        var pending: [Int] = []
        for (index, (change, lookup)) in changes.enumerated() {
            if case .changed = change {
                pending.append(index)
            } else if case .miss? = lookup {
                outcomes[index] = .absent
            } else {
                // A deletion: only an entry memcached holds needs deleting (a reader that leases
                // after this look reads the row's absence from PostgreSQL).
                invalidating.append(index)
            }
        }
        for _ in 0..<configuration.writeThroughAttempts where !pending.isEmpty {
            let unlooked = pending.filter { lookups[$0] == nil }
            for (index, look) in zip(unlooked, look(unlooked.map { keys[$0] })) {
                lookups[index] = look.found
            }
            var replacing: [(index: Int, store: MemcachedStore)] = []
            for index in pending {
                guard let found = lookups[index], case .changed(_, let version, let row) = changes[index].change else {
                    preconditionFailure("a change to refresh without a look")
                }
                lookups[index] = nil
                switch found {
                case .miss:
                    outcomes[index] = .absent
                case .failure:
                    outcomes[index] = .failed
                case .hit(let item):
                    // A lease may belong to a reader whose row predates this commit.
                    guard let cachedVersion = CacheEntry(decoding: item.value, shape: configuration.entryShape)?.version else {
                        invalidating.append(index)
                        continue
                    }
                    if cachedVersion >= version {
                        outcomes[index] = .current
                    } else if let row, row.version == version {
                        replacing.append((index, entryStore(CacheEntry.encode(row), key: keys[index], over: item.cas)))
                    } else {
                        invalidating.append(index)
                    }
                }
            }
            pending = []
            for ((index, _), confirmation) in zip(replacing, storeConfirming(replacing.map(\.store))) {
                switch confirmation {
                case .landed: outcomes[index] = .stored
                case .lost(let readBack):
                    // Changed meanwhile: look again.
                    lookups[index] = readBack
                    pending.append(index)
                case .failed: invalidating.append(index)
                }
            }
        }
        invalidating += pending
        for (index, deleted) in zip(invalidating, forget(invalidating.map { keys[$0] })) {
            switch deleted {
            case .deleted: outcomes[index] = .invalidated
            case .notFound: outcomes[index] = .absent
            case .failure: outcomes[index] = .failed
            }
        }
        return outcomes.map { $0 ?? .failed }  // each ends in one of the branches above
    }
}
