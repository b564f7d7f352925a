import Logging
import MemcachedClient
import ServiceRuntime

/// Read and populate (docs/design.md §2.1): hits from memcached, misses populated under a lease.
extension ProfileRepository {
    /// The profile with this id, never older than `minVersion` when PostgreSQL has that version.
    ///
    /// - Returns: `nil` when no such profile exists.
    /// - Throws: ``ProfileStoreError/unavailable`` when the answer needs PostgreSQL and it is down.
    public func read(id: Int64, minVersion: Int32? = nil) throws(ProfileStoreError) -> Representation? {
        try read(id: id, minVersion: minVersion, batched: nil)
    }

    /// ``read(id:minVersion:)`` with what a batch learned of the id for this read (docs/design.md §6).
    public func read(id: Int64, minVersion: Int32?, batched: BatchedRead?) throws(ProfileStoreError) -> Representation? {
        // A shared PostgreSQL read that began after this instant answers this read, floor included.
        let began = ContinuousClock.now
        var prefetched: Prefetch?
        switch batched {
        case .loaded(let answer)?:
            // Loaded with others for this request, after it arrived.
            return try answer.get()
        case .prefetched(let prefetch)?:
            prefetched = prefetch
        case nil:
            break
        }
        cache.beginRequest()
        let key = configuration.key(for: id)
        var waits = configuration.leaseWaits[...]
        var sentLease: UInt64?
        var firstLookup = true
        while true {
            let found: MemcachedGetResult
            if firstLookup, readStrategy.leaseFirst {
                // While misses are common, the first lookup puts a lease down too (see ReadStrategy);
                // later looks (after a lease wait) only read.
                let lease = addLease(key: key)
                sentLease = lease.token
                found = lease.found
            } else if let prefetch = prefetched.take() {
                found = prefetch.lookup
            } else {
                found = cache.get(key)
            }
            let entry: CacheEntry?
            if case .hit(let item) = found { entry = CacheEntry(decoding: item.value, shape: configuration.entryShape) } else { entry = nil }
            if firstLookup {
                firstLookup = false
                switch entry {
                case .profile?, .absent?: readStrategy.record(miss: false)
                case .lease?, nil: readStrategy.record(miss: true)
                }
            }
            let lookup: ReadStep.Lookup
            switch (found, entry) {
            case (.hit, .profile(let version, _)?): lookup = .profile(version: version)
            case (.hit, .absent?): lookup = .absent
            case (.hit, .lease(let token)?): lookup = token == sentLease ? .ownLease : .othersLease
            case (.hit, nil): lookup = .undecodable
            case (.miss, _): lookup = .miss
            case (.failure, _): lookup = .failed
            }
            // Only another reader's lease needs to know of a read in this process (a lock).
            let flight = lookup == .othersLease ? shared.inFlight.existing(id) : nil
            switch ReadStep.next(after: lookup, minVersion: minVersion, readingInProcess: flight != nil, waits: &waits) {
            case .answerCached:
                guard case .profile(let version, let json)? = entry else {
                    preconditionFailure("a cached answer without a cached profile")
                }
                statistics.record(.hit)
                return Representation(version: version, json: Array(json), cacheOutcome: .hit)
            case .answerAbsent:
                statistics.record(.absentHit)
                return nil
            case .bypass(let cachedVersion):
                statistics.record(.bypass)
                return try bypass(id: id, cachedVersion: cachedVersion, floor: minVersion, since: began)
            case .populateOverOwnLease:
                guard case .hit(let item) = found else { preconditionFailure("our lease without a hit") }
                statistics.record(.miss)
                return try load(
                    id: id, key: key, minVersion: minVersion, replacingCAS: nil, heldLeaseCAS: item.cas, since: began)
            case .load(let replacingUndecodable):
                statistics.record(.miss)
                var replacingCAS: UInt64?
                if replacingUndecodable, case .hit(let item) = found { replacingCAS = item.cas }
                return try load(id: id, key: key, minVersion: minVersion, replacingCAS: replacingCAS, since: began)
            case .followInFlight:
                guard let flight else { preconditionFailure("following without a read in this process") }
                return try follow(flight, id: id, minVersion: minVersion, since: began)
            case .waitAndLookAgain(let wait):
                statistics.record(.leaseWait)
                sleepThread(for: wait)
                continue
            case .readWithoutPopulating(let memcachedFailed):
                if memcachedFailed, case .failure(let error) = found {
                    statistics.record(.error)
                    logger.debug("cache read failed", metadata: ["error": "\(error)"])
                    return try readDatabase(id: id, floor: minVersion, outcome: .error, since: began)
                }
                statistics.record(.miss)
                guard case .hit(let item) = found else { preconditionFailure("another reader's lease without a hit") }
                // As of a moment after the look that saw the lease (a standby's row too, §8): the row
                // may be stored over that lease, whose reader may have read an older one.
                return try readSettling(id: id, key: key, floor: minVersion, after: .now, seenCAS: item.cas)
            }
        }
    }

    /// Whether this worker's reads gain from being batched: not while most of them miss.
    public var prefersBatches: Bool { !readStrategy.leaseFirst }

    /// Looks up the entries of `ids` in one round trip (a multi-get), for the reads of a batch of
    /// requests taken together: a read handed its id's entry (``read(id:minVersion:batched:)``)
    /// is a hit without a round trip of its own (docs/design.md §6).
    ///
    /// A prefetched entry is as good as the read's own lookup for a request that arrived before
    /// it was made, and only until that id is written: the batch hands it to its own reads only.
    /// Nothing is looked up while reads send their lease first (misses are common: each read's
    /// first lookup puts its lease down at once) unless `whileMissesAreCommon` — a list's, whose
    /// misses then load together with one query (§2.7), which beats a lease-first lookup and a
    /// query per member. An id without an entry in the answer is read as if alone: an entry
    /// that is a lease or undecodable, or a key on a node that answered while another failed.
    func prefetch(ids: [Int64], whileMissesAreCommon: Bool = false) -> [Int64: Prefetch] {
        guard !ids.isEmpty, whileMissesAreCommon || !readStrategy.leaseFirst else { return [:] }
        var prefetched: [Int64: Prefetch] = [:]
        cache.beginRequest()
        let keys = ids.map { configuration.key(for: $0) }
        switch cache.get(many: keys) {
        case .success(let items):
            for (id, key) in zip(ids, keys) {
                guard let item = items[key] else {
                    prefetched[id] = .missing
                    continue
                }
                switch CacheEntry(decoding: item.value, shape: configuration.entryShape) {
                case .profile(let version, _)?: prefetched[id] = .profile(item, version: version)
                case .absent?: prefetched[id] = .absent(item)
                case .lease?, nil: break  // the read looks again, and waits or loads
                }
            }
        case .failure(let error):
            // The keys of the node that failed have had their one wait (§5.1).
            if let failed = error.node {
                for (id, key) in zip(ids, keys) where cache.server(forKey: key) == failed {
                    prefetched[id] = .failed(error)
                }
            }
        }
        return prefetched
    }

    /// A miss: coalesce with other readers of the id in this process, else populate under a lease.
    ///
    /// - Parameter heldLeaseCAS: the CAS value of a lease this reader already holds (sent with its
    ///   first lookup). It then reads and populates itself even if another reader of this process
    ///   is reading the id: following would leave its lease to block every other reader.
    private func load(
        id: Int64, key: String, minVersion: Int32?, replacingCAS: UInt64?, heldLeaseCAS: UInt64? = nil,
        since began: ContinuousClock.Instant
    ) throws(ProfileStoreError) -> Representation? {
        var flight: InFlightReads.Flight?
        switch shared.inFlight.join(id) {
        case .follower(let leadersFlight):
            if heldLeaseCAS == nil { return try follow(leadersFlight, id: id, minVersion: minVersion, since: began) }
        case .leader(let newFlight):
            flight = newFlight
        }

        var outcome = InFlightReads.Outcome.failed(.unavailable)
        defer { if let flight { shared.inFlight.finish(id, flight: flight, outcome: outcome) } }

        let lease = heldLeaseCAS.map { LeaseAttempt(ownCAS: $0) } ?? attemptLease(key: key, replacingCAS: replacingCAS)
        let leaseCAS = lease.ownCAS
        shared.hooks.beforeDatabaseRead?(id)
        flight?.markReadStarted()
        let profile: Profile?
        do {
            // After the lease: a standby's row must be as new as any version cached before it (§8).
            profile = try readRow(id: id, floor: minVersion, after: .now)
        } catch {
            outcome = .failed(error)
            // Deleting is always safe: at worst the next reader misses.
            if leaseCAS != nil { _ = cache.delete(key) }
            throw error
        }
        shared.hooks.afterDatabaseRead?(id)

        outcome = storeLoaded(profile, id: id, key: key, lease: lease, flight: flight)
        return profile.map { Representation($0, outcome: .miss) }
    }

    /// Stores what a load read under the reader's lease — the row, or the record that there is
    /// none (absence is cached like a row, §2.6: a storm of reads of ids that do not exist costs
    /// PostgreSQL one read per id, not one per request) — and returns the outcome for the flight's
    /// followers. Without a lease of its own the reader populates nothing, but settles the key
    /// (over the other reader's lease it found) before the row is answered; so does a reader
    /// whose populate lost.
    func storeLoaded(
        _ profile: Profile?, id: Int64, key: String, lease: LeaseAttempt, flight: InFlightReads.Flight?
    ) -> InFlightReads.Outcome {
        guard let leaseCAS = lease.ownCAS else {
            if profile != nil { statistics.record(.populateSkipped) }
            settle(answering: profile, id: id, key: key, lease: lease)
            return profile.map { .found($0, populated: false) } ?? .notFound
        }
        // Closed to new followers before the populate is sent: one that joined after the row
        // landed could miss a write acknowledged (and evicted) since (§2.1).
        if let flight { shared.inFlight.close(id, flight: flight) }
        guard let profile else {
            let populate = populateAbsent(key: key, leaseCAS: leaseCAS)
            statistics.record(populate == .stored ? .populateStored : .populateLost)
            settle(answering: nil, id: id, key: key, populate: populate)
            return .notFound
        }
        let populate = populate(key: key, profile: profile, leaseCAS: leaseCAS)
        statistics.record(populate == .stored ? .populateStored : .populateLost)
        settle(answering: profile, id: id, key: key, populate: populate)
        shared.hooks.afterPopulate?(id)
        return .found(profile, populated: populate == .stored)
    }

    /// Waits for another reader's PostgreSQL read in this process and uses it if it may.
    ///
    /// The wait is bounded, and so is the number of readers waiting (docs/design.md §5): a
    /// reader that cannot wait, or waited in vain, answers 503 rather than read the row itself —
    /// a read that is slow for the leader would be as slow for it, and could end up running in
    /// every worker.
    private func follow(
        _ flight: InFlightReads.Flight, id: Int64, minVersion: Int32?, since began: ContinuousClock.Instant
    ) throws(ProfileStoreError) -> Representation? {
        shared.hooks.willFollow?(id)
        let outcome: InFlightReads.Outcome
        let wait = flight.wait(timeout: configuration.coalescedWait, slots: shared.coalescedWaitSlots, since: began)
        switch wait {
        case .usable(let usable, let readAfterJoin):
            outcome = usable
            if case .found(let profile, _) = usable, let minVersion, profile.version < minVersion {
                statistics.record(.coalesced)
                // A row read after this request arrived is PostgreSQL's answer to its floor: the
                // floor is above every version there is, and the current row is the answer (§2.1).
                if readAfterJoin { return Representation(profile, outcome: .bypass) }
                statistics.record(.bypass)
                return try bypass(id: id, cachedVersion: profile.version, floor: minVersion, since: began)
            }
        case .unusable:
            return try readSettling(id: id, key: configuration.key(for: id), floor: minVersion, after: began, seenCAS: nil)
        case .timedOut, .refused:
            throw gaveUpWaiting(wait)
        }
        statistics.record(.coalesced)
        switch outcome {
        case .found(let profile, _):
            return Representation(profile, outcome: .miss)
        case .notFound: return nil
        case .failed(let error): throw error
        }
    }

    /// Puts a lease where there is no entry (or replaces an undecodable one) and returns the
    /// lease's CAS value, or `nil` if another reader or a writer got there first.
    func takeLease(key: String, replacingCAS: UInt64?) -> UInt64? {
        attemptLease(key: key, replacingCAS: replacingCAS).ownCAS
    }

    /// What an attempt to put a lease down left at the key.
    struct LeaseAttempt {
        /// The CAS value of the lease, when it is this reader's.
        var ownCAS: UInt64?
        /// The CAS value of another reader's lease (or an undecodable entry) read back instead: a
        /// row read after it may be stored over it (``settle(answering:id:key:seenCAS:)``).
        var othersCAS: UInt64?
        /// The version of a profile entry (0: a record of absence) read back instead.
        var cachedVersion: Int32?

        /// What the key held when read back: the reader's own lease, another's, or neither; a
        /// profile counts only in the reader's `shape`.
        init(readBack: MemcachedGetResult, token: UInt64, shape: UInt32) {
            guard case .hit(let item) = readBack else { return }
            switch CacheEntry(decoding: item.value, shape: shape) {
            case .lease(let found)? where found == token: ownCAS = item.cas
            case .lease?, nil: othersCAS = item.cas
            case .profile(let version, _)?: cachedVersion = version
            case .absent?: cachedVersion = 0
            }
        }

        init(ownCAS: UInt64? = nil) { self.ownCAS = ownCAS }
    }

    /// Puts a lease where there is no entry (or replaces an undecodable one), and says whose
    /// lease is there now.
    func attemptLease(key: String, replacingCAS: UInt64?) -> LeaseAttempt {
        let token: UInt64
        let readBack: MemcachedGetResult
        if let replacingCAS {
            let lease = newLease(for: key)
            token = lease.token
            guard case .stored = cache.cas(
                key, value: lease.entry.value, cas: replacingCAS, flags: 0, expiration: lease.entry.expiration)
            else { return LeaseAttempt() }
            readBack = cache.get(key)
        } else {
            (token, readBack) = addLease(key: key)
        }
        // Neither `add` nor `cas` returns the new CAS value; read it back, and make sure the lease is ours.
        return LeaseAttempt(readBack: readBack, token: token, shape: configuration.entryShape)
    }

    /// A new lease for `key` (docs/design.md §2.1): a random token, and the entry that holds it
    /// for the lease's lifetime. Every lease the repository takes is made here.
    func newLease(for key: String) -> (token: UInt64, entry: MemcachedStore) {
        let token = UInt64.random(in: 1...UInt64.max, using: &random)
        let entry = MemcachedStore(
            key: key, value: CacheEntry.encodeLease(token: token), expiration: configuration.leaseTTLSeconds)
        return (token, entry)
    }

    /// Adds a new lease and reads the key back in one round trip (`addAndGet`): the add's own
    /// answer is not needed, the token read back says whether the lease there is this reader's.
    private func addLease(key: String) -> (token: UInt64, found: MemcachedGetResult) {
        let lease = newLease(for: key)
        let found = cache.addAndGet(key, value: lease.entry.value, flags: 0, expiration: lease.entry.expiration)
        return (lease.token, found)
    }

    enum PopulateOutcome {
        case stored
        /// The lease was replaced (a write, another reader) before the populate arrived.
        case lost
        /// The key held nothing when the populate arrived (an eviction, a flush, a refresh): a
        /// later lease's reader reads after this, so nothing older than the row can land.
        case gone
        case failed
    }

    /// Stores the record of an absent profile over the reader's lease, if the lease is still there.
    func populateAbsent(key: String, leaseCAS: UInt64) -> PopulateOutcome {
        store(CacheEntry.encodedAbsent, key: key, overLease: leaseCAS)
    }

    /// Stores `profile` over the lease whose CAS value is `leaseCAS`, if the lease is still there.
    func populate(key: String, profile: Profile, leaseCAS: UInt64) -> PopulateOutcome {
        store(CacheEntry.encode(profile), key: key, overLease: leaseCAS)
    }

    func store(_ value: [UInt8], key: String, overLease leaseCAS: UInt64) -> PopulateOutcome {
        let result = cache.cas(
            key, value: value, cas: leaseCAS, flags: 0, expiration: configuration.jitteredTTLSeconds(using: &random))
        switch result {
        case .stored:
            return .stored
        case .notFound:
            return .gone
        case .exists, .notStored:
            return .lost
        case .failure(let error):
            statistics.record(.error)
            logger.debug("cache populate failed", metadata: ["error": "\(error)"])
            return .failed
        }
    }

    /// The cached entry is older than the reader's `min_version`: answer from PostgreSQL and
    /// bring the entry up to the row.
    ///
    /// Concurrent bypasses of one id share one read, like misses (§2.1): a read that began after
    /// this request arrived answers its floor, whatever it finds. When the row is older than the
    /// floor — no such version exists, say a client sent `min_version=2147483647` — the current
    /// row is the answer, and a flood of such requests costs one read per id at a time.
    private func bypass(
        id: Int64, cachedVersion: Int32, floor: Int32?, since began: ContinuousClock.Instant
    ) throws(ProfileStoreError) -> Representation? {
        // A flight whose read began before this reader's cannot answer its floor, but the next one
        // it joins (or leads) can: it begins after the first ends.
        for _ in 0..<3 {
            switch shared.inFlight.join(id) {
            case .leader(let flight):
                var outcome = InFlightReads.Outcome.failed(.unavailable)
                defer { shared.inFlight.finish(id, flight: flight, outcome: outcome) }
                // Spaced from the last read of this id past the cache: readers arriving in the
                // wait follow this read, so a flood of unreachable floors is a read per interval.
                let turn = shared.inFlight.turnToReadPastCache(id, spacing: configuration.floorReadSpacing)
                let wait = ContinuousClock.now.duration(to: turn)
                if wait > .zero { sleepThread(for: wait) }
                flight.markReadStarted()
                do {
                    let profile = try readPast(cachedVersion: cachedVersion, floor: floor, id: id)
                    outcome = profile.map { .found($0, populated: false) } ?? .notFound
                    return profile.map { Representation($0, outcome: .bypass) }
                } catch {
                    outcome = .failed(error)
                    throw error
                }
            case .follower(let flight):
                let wait = flight.wait(timeout: configuration.coalescedWait, slots: shared.coalescedWaitSlots, since: began)
                switch wait {
                case .usable(.found(let profile, _), readAfterJoin: true):
                    statistics.record(.coalesced)
                    return Representation(profile, outcome: .bypass)
                case .usable(.notFound, readAfterJoin: true):
                    statistics.record(.coalesced)
                    return nil
                case .usable(.failed(let error), _):
                    throw error
                case .usable, .unusable:
                    continue
                case .timedOut, .refused:
                    throw gaveUpWaiting(wait)
                }
            }
        }
        return try readPast(cachedVersion: cachedVersion, floor: floor, id: id).map { Representation($0, outcome: .bypass) }
    }

    /// Reads the row past a cached entry at `cachedVersion` and brings the entry up to it (or
    /// clears a lease taken meanwhile) before it is answered.
    private func readPast(cachedVersion: Int32, floor: Int32?, id: Int64) throws(ProfileStoreError) -> Profile? {
        guard let profile = try readRow(id: id, floor: floor, after: .now) else { return nil }
        if profile.version > cachedVersion {
            settle(answering: profile, id: id, key: configuration.key(for: id), seenCAS: nil)
        }
        return profile
    }

    /// A wait for another reader's read that ended without an answer (it ran out, or no waiting
    /// place was free): counted, and the read is answered 503 rather than read again (§5.3).
    func gaveUpWaiting(_ wait: InFlightReads.Wait) -> ProfileStoreError {
        if case .refused = wait { statistics.record(.coalescedWaitRefused) } else { statistics.record(.coalescedWaitExpired) }
        return .unavailable
    }

    /// A read that populates nothing of its own: the row as of a moment after `began`, answered
    /// once the key is settled (§2.9) — over `seenCAS`, the lease it saw before the read, if any.
    private func readSettling(
        id: Int64, key: String, floor: Int32?, after began: ContinuousClock.Instant, seenCAS: UInt64?
    ) throws(ProfileStoreError) -> Representation? {
        let row = try readRow(id: id, floor: floor, after: began)
        settle(answering: row, id: id, key: key, seenCAS: seenCAS)
        return row.map { Representation($0, outcome: .miss) }
    }

    /// A read that populates nothing and settles nothing — memcached failed: the row as of a
    /// moment after the request arrived.
    private func readDatabase(
        id: Int64, floor: Int32?, outcome: CacheOutcome, since began: ContinuousClock.Instant
    ) throws(ProfileStoreError) -> Representation? {
        try readRow(id: id, floor: floor, after: began).map { Representation($0, outcome: outcome) }
    }
}
