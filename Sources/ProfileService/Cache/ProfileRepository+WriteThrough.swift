import Logging
import MemcachedClient

/// Write-through (docs/design.md §2.2): the writer brings the entry up to its new version at
/// once, so its own next read — and everyone else's — is a hit on it. One write and the writes
/// of a batch made together (``writeTogether(_:)``) take the same steps; a batch sends each step's
/// commands for all its keys in one round trip.
extension ProfileRepository {
    /// The update (optimistic when `expectedVersion` is given), then a guarded write-through of
    /// the new version.
    ///
    /// The write-through's first look at the entry travels beside the `UPDATE` (see
    /// ``writing(_:_:)``), so a write costs the statement's round trip and one `cas`.
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

    /// ``update(id:changes:expectedVersion:)`` for a request whose write a batch may have made
    /// (``writeTogether(_:)``): then its outcome, cache settled, is the answer.
    public func update(_ write: ProfileUpdate, madeTogether: WrittenTogether?) throws(ProfileStoreError) -> ProfileUpdateOutcome {
        if let together = madeTogether { return try together.outcome.get() }
        let (written, looks) = writing([write.id]) { () throws(ProfileStoreError) in
            try store.update(id: write.id, changes: write.changes, expectedVersion: write.expectedVersion)
        }
        settle([(write, written, looks[0])])
        return try written.get()
    }

    /// Brings the cache in line with what each update came to: a new version written through, a
    /// 409's current row or a deletion refreshed, an unknown outcome invalidated, and the lease of
    /// a look whose write did not happen released — each kind for every write at once.
    func settle(_ writes: [(write: ProfileUpdate, written: Result<ProfileUpdateOutcome, ProfileStoreError>, look: LeaseAttempt?)]) {
        var writingThrough: [(profile: Profile, look: LeaseAttempt?)] = []
        var refreshing: [(change: ProfileChange, lookup: MemcachedGetResult?)] = []
        // The leases of looks whose writes did not happen: readers would wait on them until they
        // expire. And the entries of handles renames took (docs/design.md §12).
        var releasing: [String] = []
        for (write, written, look) in writes {
            switch written {
            case .success(.updated(let profile)):
                writingThrough.append((profile, look))
                if write.changes.username != nil, let handle = ProfileHandle(username: profile.username) {
                    releasing.append(configuration.key(for: handle))
                }
            case .success(.versionMismatch(let current)):
                refreshing.append((.changed(id: write.id, version: current.version, row: current), nil))
            case .success(.notFound):
                refreshing.append((.deleted(id: write.id), nil))
            case .failure(.unavailable):
                // Committed or not is unknown: the version it would have made (any, without an
                // expected one) must not be hidden by an older entry.
                if let expected = write.expectedVersion, expected < Int32.max {
                    refreshing.append((.changed(id: write.id, version: expected + 1, row: nil), nil))
                } else {
                    refreshing.append((.deleted(id: write.id), nil))
                }
            case .failure:
                if look?.ownCAS != nil { releasing.append(configuration.key(for: write.id)) }
            }
        }
        writeThrough(writingThrough)
        refresh(refreshing)
        forget(releasing)
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
        let (written, looks) = writing([id]) { () throws(ProfileStoreError) in
            try store.create(id: id, username: username, displayName: displayName, fields: fields)
        }
        switch written {
        case .success(let profile):
            writeThrough([(profile, looks[0])])
            handleTaken(profile.username)
        case .failure:
            if looks[0]?.ownCAS != nil { forget([configuration.key(for: id)]) }
        }
        return try written.get()
    }

    /// Runs `write` — the statement that writes the rows of `ids` — with each entry's first look
    /// in flight beside it (docs/design.md §2.2): a lease `add`ed where the key is free and the
    /// key read back, sent before the statement and read after it, so the looks cost no round
    /// trip of their own. Either answer is usable after the commit, whichever moment memcached
    /// read the key at: a profile entry as the write-through's cas target (an entry unchanged
    /// since any moment proves no newer version was written through since), the writer's own
    /// lease as a reader's lease (the row is read again after it, before it is populated).
    /// Begins the request for the circuit breaker.
    ///
    /// - Returns: what `write` returned, and the look of each id, in their order; nil where the
    ///   round trip of several failed (it says nothing of any key: the write-through looks again).
    func writing<Written>(
        _ ids: [Int64], _ write: () throws(ProfileStoreError) -> Written
    ) -> (Result<Written, ProfileStoreError>, [LeaseAttempt?]) {
        cache.beginRequest()
        let shape = configuration.entryShape
        let leases = ids.map { newLease(for: configuration.key(for: $0)) }
        guard leases.count > 1 else {
            let entry = leases[0].entry
            let sent = cache.addAndGet(
                entry.key, value: entry.value, flags: 0, expiration: entry.expiration, around: { Result(catching: write) })
            return (sent.value, [LeaseAttempt(token: leases[0].token, look: Look(sent.found, shape: shape))])
        }
        let sent = cache.addAndGet(many: leases.map(\.entry), flags: 0) { Result(catching: write) }
        guard case .success(let items) = sent.found else { return (sent.value, leases.map { _ in nil }) }
        return (sent.value, leases.map { lease in
            LeaseAttempt(token: lease.token, look: Look(items[lease.entry.key].map { .hit($0) } ?? .miss, shape: shape))
        })
    }

    /// Brings the cache up to `profile` without ever moving it backwards.
    ///
    /// - An older profile entry, or an absent one, is replaced with `cas` (retried on conflict): an
    ///   entry that lived through every write since it landed proves no newer version was acknowledged.
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
        writeThrough([(profile, nil)])[0]
    }

    /// ``writeThrough(_:)`` for several profiles (of different ids), each step for all of them in
    /// one round trip; `look` is the first look at each entry, taken beside the statement that
    /// committed it (``writing(_:_:)``) — later attempts look again.
    /// - Returns: each one's outcome, in order.
    @discardableResult
    func writeThrough(_ written: [(profile: Profile, look: LeaseAttempt?)]) -> [WriteThroughOutcome] {
        var outcomes = [WriteThroughOutcome?](repeating: nil, count: written.count)
        let keys = written.map { configuration.key(for: $0.profile.id) }
        // Each version's entry is made once, whatever the attempts.
        let entries = written.map { CacheEntry.encode($0.profile) }
        var looks = written.map(\.look)
        var givingUp: [Int] = []
        var pending = Array(written.indices)
        for _ in 0..<configuration.writeThroughAttempts where !pending.isEmpty {
            let unlooked = pending.filter { looks[$0] == nil }
            for (index, look) in zip(unlooked, look(unlooked.map { keys[$0] })) { looks[index] = LeaseAttempt(look: look) }
            var stores: [(index: Int, store: MemcachedStore)] = []
            var leased: [(index: Int, leaseCAS: UInt64)] = []
            var leasing: [(index: Int, replacingCAS: UInt64?)] = []
            var next: [Int] = []
            for index in pending {
                guard let look = looks[index]?.look else { preconditionFailure("a write-through without a look") }
                let step = WriteThroughStep(writing: written[index].profile.version, look: look, ownLeaseCAS: looks[index]?.ownCAS)
                looks[index] = nil
                switch step {
                case .leave:
                    statistics.record(.writeThroughSkippedNewer)
                    outcomes[index] = .skippedNewer
                case .replace(let cas):
                    stores.append((index, entryStore(entries[index], key: keys[index], over: cas)))
                case .repopulate(_, let heldLeaseCAS?):
                    leased.append((index, heldLeaseCAS))
                case .repopulate(let replacingCAS, nil):
                    leasing.append((index, replacingCAS))
                case .giveUp:
                    givingUp.append(index)
                }
            }
            for ((index, _), lease) in zip(leasing, putLeases(leasing.map { (keys[$0.index], $0.replacingCAS) })) {
                if let leaseCAS = lease.ownCAS {
                    leased.append((index, leaseCAS))
                } else {
                    statistics.record(.writeThroughCASConflict)
                    next.append(index)
                }
            }
            if !leased.isEmpty {
                // Under a lease of the writer's own, the row read after it, as a reader's would be:
                // from the primary, which has every acknowledged version.
                let ids = leased.map { written[$0.index].profile.id }
                statistics.record(.databaseRead, count: ids.count)
                let rows = try? (ids.count == 1 ? store.profile(id: ids[0]).map { [ids[0]: $0] } ?? [:] : store.profiles(ids: ids))
                for (index, leaseCAS) in leased {
                    guard let row = rows?[written[index].profile.id] else {
                        givingUp.append(index)
                        continue
                    }
                    stores.append((index, entryStore(CacheEntry.encode(row), key: keys[index], over: leaseCAS)))
                }
            }
            for ((index, _), confirmation) in zip(stores, storeConfirming(stores.map(\.store))) {
                switch confirmation {
                case .landed:
                    statistics.record(.writeThroughStored)
                    outcomes[index] = .stored
                case .lost(let readBack):
                    statistics.record(.writeThroughCASConflict)
                    looks[index] = readBack.map { LeaseAttempt(look: Look($0, shape: configuration.entryShape)) }
                    next.append(index)
                case .failed:
                    givingUp.append(index)
                }
            }
            pending = next
        }
        givingUp += pending
        for (index, deleted) in zip(givingUp, forget(givingUp.map { keys[$0] })) {
            switch deleted {
            case .deleted, .notFound:
                statistics.record(.writeThroughDeleted)
                outcomes[index] = .deleted
            case .failure(let error):
                statistics.record(.writeThroughFailed)
                outcomes[index] = .failed
                logger.warning(
                    "write-through and delete failed; the change feed repairs the entry when its node answers",
                    metadata: ["error": "\(error)"])
            }
        }
        return outcomes.map { $0 ?? .failed }  // each ends in one of the branches above
    }

    /// What a write-through does with what it found at the key (§2.2).
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

        init(writing version: Int32, look: ProfileRepository.Look, ownLeaseCAS: UInt64?) {
            switch look.found {
            case .hit(let item):
                if let cachedVersion = look.cachedVersion {
                    self = cachedVersion >= version ? .leave : .replace(cas: item.cas)
                } else {
                    self = .repopulate(replacingCAS: item.cas, heldLeaseCAS: ownLeaseCAS)
                }
            case .miss: self = .repopulate(replacingCAS: nil, heldLeaseCAS: ownLeaseCAS)
            case .failure: self = .giveUp
            }
        }
    }
}
