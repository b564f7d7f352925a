import Logging
import MemcachedClient

/// Write-through (docs/design.md §2.2): the writer brings the entry up to its new version at
/// once, so its own next read — and everyone else's — is a hit on it.
extension ProfileRepository {
    /// The optimistic update, then a guarded write-through of the new version.
    ///
    /// A 409 refreshes the entry to the current row it reports; an update whose outcome is
    /// unknown (the connection broke around COMMIT) invalidates an older entry, since the new
    /// version may be committed. The change feed repairs both as well; these repairs only make
    /// it sooner.
    public func updateDisplayName(id: Int64, to displayName: String, expectedVersion: Int32)
        throws(ProfileStoreError) -> ProfileUpdateOutcome
    {
        cache.beginRequest()
        prefetched[id] = nil
        let outcome: ProfileUpdateOutcome
        do {
            outcome = try store.updateDisplayName(id: id, to: displayName, expectedVersion: expectedVersion)
        } catch .unavailable {
            if expectedVersion < Int32.max {
                refresh(after: .changed(id: id, version: expectedVersion + 1, row: nil))
            }
            throw .unavailable
        }
        switch outcome {
        case .updated(let profile): writeThrough(profile)
        case .versionMismatch(let current): refresh(after: .changed(id: id, version: current.version, row: current))
        case .notFound: refresh(after: .deleted(id: id))
        }
        return outcome
    }

    public func create(id: Int64, username: String, displayName: String) throws(ProfileStoreError) -> Profile {
        cache.beginRequest()
        prefetched[id] = nil
        let profile = try store.create(id: id, username: username, displayName: displayName)
        writeThrough(profile)
        return profile
    }

    /// Brings the cache up to `profile` without ever moving it backwards.
    ///
    /// - An older profile entry, or an absent one, is replaced with `cas` (retried on conflict): an entry that
    ///   lived through every write since it landed proves no newer version was acknowledged.
    /// - An equal or newer entry is left alone.
    /// - An empty slot, a reader's lease or an undecodable entry proves nothing: a newer version
    ///   may have been written through and evicted meanwhile, so storing `profile` there could
    ///   move the cache backwards (the "absent → add" race, §2.2). The writer instead repopulates
    ///   the slot like a reader: a lease of its own, which also defeats any reader's late
    ///   populate, then the row from PostgreSQL stored with `cas` against that lease.
    ///
    /// When none of that works the key is deleted. When the delete fails too (the node is
    /// unreachable from here), the change feed repairs the entry once the node answers (§3).
    @discardableResult
    public func writeThrough(_ profile: Profile) -> WriteThroughOutcome {
        let key = configuration.key(for: profile.id)
        attempts: for _ in 0..<configuration.writeThroughAttempts {
            let replacingCAS: UInt64?
            switch cache.get(key) {
            case .hit(let item):
                // A profile entry, or the record of an absent one (version 0: a creation replaces it).
                if let cachedVersion = CacheEntry(decoding: item.value)?.version {
                    if cachedVersion >= profile.version {
                        statistics.record(.writeThroughSkippedNewer)
                        return .skippedNewer
                    }
                    let entry = CacheEntry.encode(profile)
                    switch cache.cas(
                        key, value: entry, cas: item.cas, flags: 0, expiration: configuration.jitteredTTLSeconds(using: &random))
                    {
                    case .stored:
                        statistics.record(.writeThroughStored)
                        return .stored
                    case .exists, .notFound:
                        statistics.record(.writeThroughCASConflict)
                        continue attempts
                    case .notStored, .failure:
                        break attempts
                    }
                }
                replacingCAS = item.cas
            case .miss:
                replacingCAS = nil
            case .failure:
                break attempts
            }
            switch repopulate(id: profile.id, key: key, replacingCAS: replacingCAS) {
            case .stored:
                statistics.record(.writeThroughStored)
                return .stored
            case .lost:
                statistics.record(.writeThroughCASConflict)
                continue attempts
            case .failed:
                break attempts
            }
        }
        switch cache.delete(key) {
        case .deleted, .notFound:
            statistics.record(.writeThroughDeleted)
            return .deleted
        case .failure(let error):
            statistics.record(.writeThroughFailed)
            logger.warning(
                "write-through and delete failed; the change feed repairs the entry when its node answers",
                metadata: ["error": "\(error)"])
            return .failed
        }
    }

    /// Stores the current row under a lease of the writer's own (see ``writeThrough(_:)``).
    private func repopulate(id: Int64, key: String, replacingCAS: UInt64?) -> PopulateOutcome {
        guard let leaseCAS = takeLease(key: key, replacingCAS: replacingCAS) else { return .lost }
        statistics.record(.databaseRead)
        guard let row = try? store.profile(id: id) else {
            _ = cache.delete(key)  // always safe: at worst the next reader misses
            return .failed
        }
        return populate(key: key, profile: row, leaseCAS: leaseCAS)
    }
}
