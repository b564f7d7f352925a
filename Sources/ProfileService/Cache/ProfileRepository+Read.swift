import Logging
import MemcachedClient
import ServiceRuntime

/// Read and populate (docs/design.md §2.1), over a batch of ids: a single read is a batch of one,
/// a list is a batch, a batch lane's misses are a batch. Each id keeps the rules of §2.1 whatever
/// the batch: hits answer from memcached, misses load under a lease, entries below a floor are
/// read past, another reader's lease is waited on; what the batch shares is the round trips —
/// one look for every id, one lease round trip, one query, one populate round trip.
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
        var first = FirstLook.byStrategy
        switch batched {
        case .loaded(let answer)?:
            // Loaded with others for this request, after it arrived.
            return try answer.get()
        case .prefetched(let prefetch)?:
            first = .given(prefetch)
        case nil:
            break
        }
        var reads = keyReads([ProfileListRequest.Member(id: id, floor: minVersion)])
        try read(&reads, first: first, since: began)
        return try reads[0].answered()
    }

    /// The members of a list, in its order (`nil`: no such profile): one batch (§2.7). Every
    /// entry is looked up in one multi-get; the members with no entry load together, the members
    /// below their floors are read past the cache together, each member by the rules of a single
    /// read.
    ///
    /// - Throws: ``ProfileStoreError/unavailable`` when a member needs PostgreSQL and it is down.
    public func read(_ list: ProfileListRequest) throws(ProfileStoreError) -> [Representation?] {
        // A list's members are distinct, in its order: each read answers its member.
        var reads = keyReads(list.members)
        try read(&reads, first: .plain, since: .now)
        return try reads.map { read throws(ProfileStoreError) in try read.answered() }
    }

    /// Loads `members` — the reads of requests whose entries a batch's multi-get found missing —
    /// together, for each request to be answered from its id's answer (``read(id:minVersion:batched:)``
    /// with ``BatchedRead/loaded(_:)``): the load began after the request arrived, so it answers any
    /// floor PostgreSQL can meet (each id is loaded once, at the highest floor asked of it).
    ///
    /// - Returns: the answer of each id. A failed load is every id's error (PostgreSQL
    ///   unavailable: 503 at once), rather than each waiting on the same server again.
    public func loadTogether(_ members: [ProfileListRequest.Member]) -> [Int64: Result<Representation?, ProfileStoreError>] {
        let distinct = ProfileListRequest(mentions: members).members
        do {
            return try read(distinct, first: .missing, since: .now)
        } catch {
            return Dictionary(distinct.map { ($0.id, .failure(error)) }, uniquingKeysWith: { first, _ in first })
        }
    }

    /// Whether this worker's reads gain from being batched: not while most of them miss.
    public var prefersBatches: Bool { !readStrategy.leaseFirst }

    /// Looks up the entries of `ids` in one round trip (a multi-get), for the reads of a batch of
    /// requests taken together: a read handed its id's entry (``read(id:minVersion:batched:)``)
    /// takes it as its first look, and a hit needs no round trip of its own (docs/design.md §6).
    ///
    /// A prefetched entry is as good as the read's own look for a request that arrived before it
    /// was made, and only until that id is written: the batch hands it to its own reads only.
    /// Nothing is looked up while reads send their lease first (misses are common: each read's
    /// first look puts its lease down at once). An id left out of the answer is read as if
    /// alone: an entry that is a lease or undecodable, or a key on a node that answered while
    /// another failed.
    func prefetch(ids: [Int64]) -> [Int64: Prefetch] {
        guard !ids.isEmpty, !readStrategy.leaseFirst else { return [:] }
        cache.beginRequest()
        var prefetched: [Int64: Prefetch] = [:]
        for (id, look) in zip(ids, look(ids.map(configuration.key(for:)))) {
            switch look.found {
            case .hit where look.cachedVersion != nil: prefetched[id] = .cached(look)
            case .hit: break  // a lease or undecodable: the read looks again, and waits or loads
            case .miss: prefetched[id] = .missing
            case .failure(let error): prefetched[id] = .failed(error)
            }
        }
        return prefetched
    }

    /// How a batch read takes its first look at its keys.
    enum FirstLook {
        /// A `gets` (a multi-get for several), or — while most of this worker's reads miss — the
        /// lease `add`ed with it (``ReadStrategy``); for a read alone.
        case byStrategy
        /// A `gets`, or one multi-get: a list's members, whose misses then load together.
        case plain
        /// A batch's multi-get found no entry: the reads load at once.
        case missing
        /// The batch's multi-get made it (``prefetch(ids:)``).
        case given(Prefetch)
    }

    /// One id of a batch read.
    struct KeyRead {
        let id: Int64
        let key: String
        let floor: Int32?
        /// The lease waits left (§2.1).
        var waits: ArraySlice<Duration>
        /// The token of the lease sent with the first look, if one was.
        var sentLease: UInt64?
        var look: Look?
        var answer: Result<Representation?, ProfileStoreError>?

        /// Its answer: the read loop leaves no read without one.
        func answered() throws(ProfileStoreError) -> Representation? {
            guard let answer else { preconditionFailure("a read left without an answer") }
            return try answer.get()
        }

        init(id: Int64, key: String, floor: Int32?, waits: ArraySlice<Duration>) {
            self.id = id
            self.key = key
            self.floor = floor
            self.waits = waits
        }
    }

    /// Reads `members` (distinct ids) as one batch; the answer of each, by id.
    private func read(
        _ members: [ProfileListRequest.Member], first: FirstLook, since began: ContinuousClock.Instant
    ) throws(ProfileStoreError) -> [Int64: Result<Representation?, ProfileStoreError>] {
        var reads = keyReads(members)
        try read(&reads, first: first, since: began)
        var answers: [Int64: Result<Representation?, ProfileStoreError>] = [:]
        answers.reserveCapacity(reads.count)
        for read in reads { answers[read.id] = read.answer }
        return answers
    }

    /// A read of each member (distinct ids), with every lease wait still ahead of it.
    private func keyReads(_ members: [ProfileListRequest.Member]) -> [KeyRead] {
        members.map { KeyRead(id: $0.id, key: configuration.key(for: $0.id), floor: $0.floor, waits: configuration.leaseWaits[...]) }
    }

    /// Runs the read protocol over `reads` until each has its answer: looks at the keys still
    /// unanswered, decides each one's next step (``ReadStep``), and takes every step of one kind
    /// for the whole batch at once. Only another process's lease sends a key round again, after
    /// a wait (§2.1).
    ///
    /// - Throws: when a step that needs PostgreSQL fails for the batch (a list fails whole, as
    ///   one of its reads would).
    func read(_ reads: inout [KeyRead], first: FirstLook, since began: ContinuousClock.Instant) throws(ProfileStoreError) {
        cache.beginRequest()
        takeFirstLook(&reads, first)
        var pending = Array(reads.indices)
        var hits = 0
        defer { statistics.record(.hit, count: hits) }
        while !pending.isEmpty {
            var loads: [LoadRequest] = []
            var readsPast: [PastRead] = []
            var settling: [Int] = []
            var memcachedFailed: [Int] = []
            var following: [(index: Int, flight: InFlightReads.Flight)] = []
            var again: [Int] = []
            var wait = Duration.zero
            for index in pending {
                let look = reads[index].look!  // every pending read was looked at
                let lookup = ReadStep.Lookup(look, sentLease: reads[index].sentLease)
                // Only another reader's lease needs to know of a read in this process (a lock).
                let flight = lookup == .othersLease ? shared.inFlight.existing(reads[index].id) : nil
                switch ReadStep.next(
                    after: lookup, minVersion: reads[index].floor, readingInProcess: flight != nil, waits: &reads[index].waits)
                {
                case .answerCached:
                    guard case .profile(let version, let json, let ownerMembers)? = look.entry else {
                        preconditionFailure("a cached answer without a cached profile")
                    }
                    hits += 1
                    reads[index].answer = .success(Representation(
                            version: version, json: ProfileJSON(publicView: Array(json), ownerMembers: ownerMembers),
                            cacheOutcome: .hit))
                case .answerAbsent:
                    statistics.record(.absentHit)
                    reads[index].answer = .success(nil)
                case .bypass(let cachedVersion):
                    statistics.record(.bypass)
                    readsPast.append(PastRead(index: index, cachedVersion: cachedVersion))
                case .populateOverOwnLease:
                    statistics.record(.miss)
                    loads.append(LoadRequest(index: index, lease: .held(LeaseAttempt(token: reads[index].sentLease, look: look))))
                case .load(let replacingUndecodable):
                    statistics.record(.miss)
                    loads.append(LoadRequest(index: index, lease: .replacing(replacingUndecodable ? look.cas : nil)))
                case .followInFlight:
                    guard let flight else { preconditionFailure("following without a read in this process") }
                    following.append((index, flight))
                case .waitAndLookAgain(let leaseWait):
                    statistics.record(.leaseWait)
                    wait = max(wait, leaseWait)
                    again.append(index)
                case .readWithoutPopulating(let failed):
                    if failed, case .failure(let error) = look.found {
                        statistics.record(.error)
                        logger.debug("cache read failed", metadata: ["error": "\(error)"])
                        memcachedFailed.append(index)
                    } else {
                        statistics.record(.miss)
                        settling.append(index)
                    }
                }
            }
            if !loads.isEmpty { try load(loads, of: &reads, since: began) }
            if !readsPast.isEmpty { try readPast(readsPast, of: &reads, since: began) }
            // As of a moment after the look that saw the lease (a standby's row too, §8).
            if !settling.isEmpty { try readSettling(settling, of: &reads, after: .now) }
            if !memcachedFailed.isEmpty {
                // Nothing to populate or settle: memcached failed. The rows as of a moment after
                // the request arrived.
                let rows = try readRows(ids: memcachedFailed.map { reads[$0].id }, floors: floors(memcachedFailed, of: reads), after: began)
                for index in memcachedFailed {
                    reads[index].answer = .success(rows[reads[index].id].map { Representation($0, outcome: .error) })
                }
            }
            // Last, once this batch's own loads have ended: its other steps act on looks just taken.
            for (index, flight) in following {
                let read = reads[index]
                reads[index].answer = Result { () throws(ProfileStoreError) in try follow(flight, read, since: began) }
            }
            pending = again
            if !again.isEmpty {
                sleepThread(for: wait)
                for (index, look) in zip(again, look(again.map { reads[$0].key })) { reads[index].look = look }
            }
        }
    }

    /// The first look of every read (the only one, for a hit), counted for ``ReadStrategy``.
    private func takeFirstLook(_ reads: inout [KeyRead], _ first: FirstLook) {
        switch first {
        case .given(let prefetch):
            reads[0].look = prefetch.look
        case .missing:
            for index in reads.indices { reads[index].look = Look(.miss, shape: configuration.entryShape) }
        case .byStrategy where readStrategy.leaseFirst:
            // While misses are common, the first look puts a lease down too (see ReadStrategy);
            // later looks (after a lease wait) only read.
            for (index, lease) in zip(reads.indices, putLeases(reads.map { ($0.key, nil) })) {
                reads[index].sentLease = lease.token
                reads[index].look = lease.look
            }
        case .byStrategy, .plain:
            for (index, look) in zip(reads.indices, look(reads.map(\.key))) { reads[index].look = look }
        }
        for read in reads {
            switch read.look?.entry {
            case .profile?, .absent?: readStrategy.record(miss: false)
            case .lease?, .handle?, nil: readStrategy.record(miss: true)
            }
        }
    }

    /// Reads that populate nothing of their own — the lease waits ran out on another process's
    /// lease, or a follower's leader read too early: their rows as of a moment after `began`,
    /// answered once each key is settled (§2.9) — over the lease the read saw, if any, whose
    /// reader may have read an older row.
    func readSettling(_ indices: [Int], of reads: inout [KeyRead], after began: ContinuousClock.Instant)
        throws(ProfileStoreError)
    {
        let rows = try readRows(ids: indices.map { reads[$0].id }, floors: floors(indices, of: reads), after: began)
        settle(indices.map { index in
            Settlement(id: reads[index].id, key: reads[index].key, row: rows[reads[index].id], seenCAS: reads[index].look?.cas)
        })
        for index in indices {
            reads[index].answer = .success(rows[reads[index].id].map { Representation($0, outcome: .miss) })
        }
    }

    /// The floors of the reads at `indices`, by id.
    func floors(_ indices: [Int], of reads: [KeyRead]) -> [Int64: Int32] {
        var floors: [Int64: Int32] = [:]
        for index in indices { floors[reads[index].id] = reads[index].floor }
        return floors
    }
}

extension ReadStep.Lookup {
    /// What a look found, for a reader that sent the lease `sentLease` with it (if any).
    init(_ look: ProfileRepository.Look, sentLease: UInt64?) {
        switch look.found {
        case .miss: self = .miss
        case .failure: self = .failed
        case .hit:
            switch look.entry {
            case .profile(let version, _, _)?: self = .profile(version: version)
            case .absent?: self = .absent
            case .lease?: self = look.ownLeaseCAS(token: sentLease) != nil ? .ownLease : .othersLease
            case .handle?, nil: self = .undecodable  // a handle's entry is no profile's
            }
        }
    }
}
