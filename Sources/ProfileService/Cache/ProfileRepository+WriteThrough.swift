import Logging
import MemcachedClient

/// Write-through (docs/design.md §2.2): the writer brings the entry up to its new version at
/// once, so its own next read — and everyone else's — is a hit on it.
extension ProfileRepository {
    /// The update (optimistic when `expectedVersion` is given), then a guarded write-through of
    /// the new version.
    ///
    /// The write-through's first look at the entry travels beside the `UPDATE` (see
    /// ``writing(id:_:)``), so a write costs the statement's round trip and one `cas`.
    /// A 409 refreshes the entry to the current row it reports; an update whose outcome is
    /// unknown (the connection broke around COMMIT) invalidates an older entry, since the new
    /// version may be committed — without an expected version, any entry. The change feed
    /// repairs both as well; these repairs only make it sooner. Both delete the lease the look
    /// may have put down (a refresh deletes any lease).
    public func update(id: Int64, changes: ProfileChanges, expectedVersion: Int32?) throws(ProfileStoreError)
        -> ProfileUpdateOutcome
    {
        try update(ProfileUpdate(id: id, changes: changes, expectedVersion: expectedVersion), madeTogether: nil)
    }

    /// ``update(id:changes:expectedVersion:)`` for a request whose write may have been made with
    /// others' (``writeTogether(_:)``): what that left of it is done here.
    public func update(_ write: ProfileUpdate, madeTogether: WrittenTogether?) throws(ProfileStoreError) -> ProfileUpdateOutcome {
        if let together = madeTogether {
            if case .success(let profile) = together.outcome, together.writtenThrough { return .updated(profile) }
            // What the batch left of this write-through goes on alone (§9.5).
            cache.beginRequest()
            return try settle(write, together.outcome.map { .updated($0) }, look: together.look)
        }
        let (written, look) = writing(id: write.id) { () throws(ProfileStoreError) in
            try store.update(id: write.id, changes: write.changes, expectedVersion: write.expectedVersion)
        }
        return try settle(write, written, look: look)
    }

    /// An optimistic change of the display name alone.
    public func updateDisplayName(id: Int64, to displayName: String, expectedVersion: Int32)
        throws(ProfileStoreError) -> ProfileUpdateOutcome
    {
        try update(ProfileUpdate(id: id, displayName: displayName, expectedVersion: expectedVersion), madeTogether: nil)
    }

    /// ``updateDisplayName(id:to:expectedVersion:)``, for a write a batch may have made.
    public func updateDisplayName(
        id: Int64, to displayName: String, expectedVersion: Int32, madeTogether: WrittenTogether?
    ) throws(ProfileStoreError) -> ProfileUpdateOutcome {
        try update(ProfileUpdate(id: id, displayName: displayName, expectedVersion: expectedVersion), madeTogether: madeTogether)
    }

    /// The display name set whatever the stored version (a patch without `If-Match`).
    public func setDisplayName(id: Int64, to displayName: String) throws(ProfileStoreError) -> ProfileUpdateOutcome {
        try update(id: id, changes: ProfileChanges(displayName: displayName), expectedVersion: nil)
    }

    /// Brings the cache in line with what an update came to, and returns it (or throws its error).
    private func settle(
        _ write: ProfileUpdate, _ written: Result<ProfileUpdateOutcome, ProfileStoreError>, look: EntryLook?
    ) throws(ProfileStoreError) -> ProfileUpdateOutcome {
        let outcome: ProfileUpdateOutcome
        switch written {
        case .success(let updated):
            outcome = updated
        case .failure(let error):
            if error == .unavailable {
                // Committed or not is unknown: the version it would have made (any, without an
                // expected one) must not be hidden by an older entry.
                if let expected = write.expectedVersion, expected < Int32.max {
                    refresh(after: .changed(id: write.id, version: expected + 1, row: nil))
                } else {
                    refresh(after: .deleted(id: write.id))
                }
            } else if let look {
                releaseLease(of: look)
            }
            throw error
        }
        switch outcome {
        case .updated(let profile): writeThrough(profile, look: look)
        case .versionMismatch(let current): refresh(after: .changed(id: write.id, version: current.version, row: current))
        case .notFound: refresh(after: .deleted(id: write.id))
        }
        return outcome
    }

    /// The deletion (at `expectedVersion` when given), then the cache brought in line: after it,
    /// or when its outcome is unknown, the entry is deleted (``refresh(after:)``: always safe — a
    /// reader's lease from before goes with it, so a row it read before the deletion never lands;
    /// the next reader records the absence, §2.6). A 409 refreshes the entry to the current row.
    /// Every other cluster is repaired from the commit stream, as for any write.
    public func delete(id: Int64, expectedVersion: Int32?) throws(ProfileStoreError) -> ProfileDeleteOutcome {
        cache.beginRequest()
        let outcome: ProfileDeleteOutcome
        do {
            outcome = try store.delete(id: id, expectedVersion: expectedVersion)
        } catch {
            if error == .unavailable { refresh(after: .deleted(id: id)) }
            throw error
        }
        switch outcome {
        case .deleted, .notFound: refresh(after: .deleted(id: id))
        case .versionMismatch(let current): refresh(after: .changed(id: id, version: current.version, row: current))
        }
        return outcome
    }

    public func create(id: Int64, username: String, displayName: String, fields: [ProfileFields.Entry] = [])
        throws(ProfileStoreError) -> Profile
    {
        let (written, look) = writing(id: id) { () throws(ProfileStoreError) in
            try store.create(id: id, username: username, displayName: displayName, fields: fields)
        }
        switch written {
        case .success(let profile):
            writeThrough(profile, look: look)
            return profile
        case .failure(let error):
            releaseLease(of: look)
            throw error
        }
    }

    /// The write-through's first look at a key, taken beside the statement that writes its row.
    struct EntryLook {
        let key: String
        /// The key as memcached held it after an `add` of the writer's lease.
        let found: MemcachedGetResult
        let leaseToken: UInt64

        /// The CAS value of the writer's own lease, when the `add` found the key free.
        var ownLeaseCAS: UInt64? {
            guard case .hit(let item) = found, CacheEntry.leaseToken(in: item.value) == leaseToken else { return nil }
            return item.cas
        }
    }

    /// Runs `write` with the entry's first look in flight beside it (docs/design.md §2.2): a
    /// lease `add`ed where the key is free and the key read back, sent before the statement and
    /// read after it, so the look costs no round trip of its own. Either answer is usable after
    /// the commit, whichever moment memcached read the key at: a profile entry as the
    /// write-through's cas target (an entry unchanged since any moment proves no newer version
    /// was written through since), the writer's own lease as a reader's lease (the row is read
    /// again after it, before it is populated). Begins the request for the circuit breaker.
    private func writing<Written>(
        id: Int64, _ write: () throws(ProfileStoreError) -> Written
    ) -> (Result<Written, ProfileStoreError>, EntryLook) {
        cache.beginRequest()
        let key = configuration.key(for: id)
        let lease = newLease(for: key)
        let sent = cache.addAndGet(
            key, value: lease.entry.value, flags: 0, expiration: lease.entry.expiration,
            around: { Result(catching: write) })
        return (sent.value, EntryLook(key: key, found: sent.found, leaseToken: lease.token))
    }

    /// Deletes the lease a look put down for a write that did not happen: readers would wait on it
    /// until it expires. Deleting is always safe: at worst the next reader misses.
    func releaseLease(of look: EntryLook) {
        if look.ownLeaseCAS != nil { _ = cache.delete(look.key) }
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
        writeThrough(profile, look: nil)
    }

    /// - Parameter look: the first look at the entry, taken beside the statement that committed
    ///   `profile` (``writing(id:_:)``); later attempts look again.
    @discardableResult
    func writeThrough(_ profile: Profile, look: EntryLook?) -> WriteThroughOutcome {
        let key = configuration.key(for: profile.id)
        var look = look
        attempts: for _ in 0..<configuration.writeThroughAttempts {
            let step = WriteThroughStep(writing: profile.version, found: look?.found ?? cache.get(key), ownLeaseCAS: look?.ownLeaseCAS, shape: configuration.entryShape)
            look = nil
            let replacingCAS: UInt64?
            let heldLeaseCAS: UInt64?
            switch step {
            case .leave:
                statistics.record(.writeThroughSkippedNewer)
                return .skippedNewer
            case .replace(let cas):
                let entry = CacheEntry.encode(profile)
                switch cache.cas(key, value: entry, cas: cas, flags: 0, expiration: configuration.jitteredTTLSeconds(using: &random)) {
                case .stored:
                    statistics.record(.writeThroughStored)
                    return .stored
                case .exists, .notFound:
                    statistics.record(.writeThroughCASConflict)
                    continue attempts
                case .notStored, .failure:
                    break attempts
                }
            case .repopulate(let replacing, let held):
                (replacingCAS, heldLeaseCAS) = (replacing, held)
            case .giveUp:
                break attempts
            }
            switch repopulate(id: profile.id, key: key, replacingCAS: replacingCAS, heldLeaseCAS: heldLeaseCAS) {
            case .stored:
                statistics.record(.writeThroughStored)
                return .stored
            case .lost, .gone:
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

    /// What a write-through does with what it found at the key (§2.2): one decision, for a write
    /// alone and for writes made together (§9.5).
    enum WriteThroughStep: Equatable {
        /// A profile entry at or above the new version: leave it.
        case leave
        /// An older profile entry, or the record of an absent one (version 0: a creation replaces
        /// it): `cas` the new version over it.
        case replace(cas: UInt64)
        /// Something that proves nothing (an empty slot, a lease, an undecodable entry): store the
        /// row under a lease — `heldLeaseCAS`, the writer's own from its look, or one taken over
        /// `replacingCAS` (nil: the slot was empty).
        case repopulate(replacingCAS: UInt64?, heldLeaseCAS: UInt64?)
        /// memcached failed: delete the key instead.
        case giveUp

        /// - Parameter shape: the writer's entry shape: an entry of another is undecodable to it.
        init(writing version: Int32, found: MemcachedGetResult, ownLeaseCAS: UInt64?, shape: UInt32) {
            switch found {
            case .hit(let item):
                if let cachedVersion = CacheEntry(decoding: item.value, shape: shape)?.version {
                    self = cachedVersion >= version ? .leave : .replace(cas: item.cas)
                } else {
                    self = .repopulate(replacingCAS: item.cas, heldLeaseCAS: ownLeaseCAS)
                }
            case .miss: self = .repopulate(replacingCAS: nil, heldLeaseCAS: ownLeaseCAS)
            case .failure: self = .giveUp
            }
        }
    }

    /// Stores the current row under a lease of the writer's own (see ``writeThrough(_:)``): the
    /// one its look put down (`heldLeaseCAS`), else one taken now.
    private func repopulate(id: Int64, key: String, replacingCAS: UInt64?, heldLeaseCAS: UInt64?) -> PopulateOutcome {
        guard let leaseCAS = heldLeaseCAS ?? takeLease(key: key, replacingCAS: replacingCAS) else { return .lost }
        statistics.record(.databaseRead)
        guard let row = try? store.profile(id: id) else {
            _ = cache.delete(key)  // always safe: at worst the next reader misses
            return .failed
        }
        return populate(key: key, profile: row, leaseCAS: leaseCAS)
    }
}
