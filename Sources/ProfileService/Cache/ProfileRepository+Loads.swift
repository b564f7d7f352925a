import Logging
import MemcachedClient

/// Misses loaded together (docs/design.md §2.7, §9): every lease in one round trip, the rows in
/// one query, every populate in one round trip — each id still under the rules of a single load
/// (§2.1). A list's missing members load this way, and so do the misses of a batch of single
/// reads that the batch lane hands on.
extension ProfileRepository {
    /// Loads `members` — the reads of requests that memcached had no entry for — together, for
    /// each request to be answered from its id's answer (``read(id:minVersion:batched:)`` with
    /// ``BatchedRead/loaded(_:)``): the load began after the request arrived, so it answers any
    /// floor PostgreSQL can meet (each id is loaded once, at the highest floor asked of it).
    ///
    /// - Returns: the answer of each id loaded here. An id missing from it was not loaded here
    ///   (another reader of this process is loading it: its read follows that one). A failed load
    ///   is every id's error (PostgreSQL unavailable: 503 at once), as the members of a failed list
    ///   get, rather than each waiting on the same server again.
    public func loadTogether(_ members: [ProfileListRequest.Member]) -> [Int64: Result<Representation?, ProfileStoreError>] {
        guard members.count > 1 else { return [:] }
        do {
            return try loadMissing(ProfileListRequest(mentions: members).members).mapValues { .success($0) }
        } catch {
            return Dictionary(members.map { ($0.id, .failure(error)) }, uniquingKeysWith: { first, _ in first })
        }
    }

    /// Loads members memcached had no entry for, as `load` loads one — each joins the reads in
    /// flight in this process and puts its lease down before PostgreSQL is read, and populates
    /// under that lease — but the leases go in one round trip, the leaders' rows come from one
    /// query and the populates go in one round trip. Members another reader of this process is
    /// loading are left out (their read follows that one).
    ///
    /// - Returns: the answer of each member loaded here (`nil` inside: no such profile).
    func loadMissing(_ members: [ProfileListRequest.Member]) throws(ProfileStoreError) -> [Int64: Representation?] {
        var leaders: [Load] = []
        var floors: [Int64: Int32] = [:]
        for member in members {
            let id = member.id
            guard case .leader(let flight) = shared.inFlight.join(id) else { continue }
            floors[id] = member.floor
            leaders.append(Load(id: id, key: configuration.key(for: id), flight: flight))
        }
        defer { for leader in leaders { shared.inFlight.finish(leader.id, flight: leader.flight, outcome: leader.outcome) } }
        guard !leaders.isEmpty else { return [:] }

        let leases = takeLeases(keys: leaders.map(\.key))
        for index in leaders.indices {
            readStrategy.record(miss: true)
            statistics.record(.miss)
            leaders[index].lease = leases[leaders[index].key] ?? LeaseAttempt()
            leaders[index].flight.markReadStarted()
        }
        let rows: [Int64: Profile]
        do {
            // After every lease: a standby's rows must be as new as any version cached before (§8).
            rows = try readRows(ids: leaders.map(\.id), floors: floors, after: .now)
        } catch {
            for index in leaders.indices {
                leaders[index].outcome = .failed(error)
                // Deleting is always safe: at worst the next reader misses.
                if leaders[index].lease.ownCAS != nil { _ = cache.delete(leaders[index].key) }
            }
            throw error
        }
        for leader in leaders { shared.hooks.afterDatabaseRead?(leader.id) }
        storeLoaded(&leaders, rows: rows)
        var answers: [Int64: Representation?] = [:]
        for leader in leaders {
            answers[leader.id] = .some(rows[leader.id].map { Representation($0, outcome: .miss) })
        }
        return answers
    }

    /// What one store of ``storeConfirming(_:)`` came to.
    struct StoreConfirmation {
        /// The bytes read back are the bytes it stored.
        let landed: Bool
        /// The key as read back after the store.
        let readBack: MemcachedItem?
    }

    /// Sends `stores` (`cas`es) in one round trip and reads every key back after them: a store
    /// landed exactly when the bytes read back are the bytes it stored — no other write can leave
    /// those bytes there, since a version names one content (§2.5). One confirmation per store, in
    /// their order; a failed round trip says nothing of any (whether each landed is unknown).
    func storeConfirming(_ stores: [MemcachedStore]) -> Result<[StoreConfirmation], MemcachedError> {
        cache.casAndGet(many: stores, flags: 0).map { readBack in
            stores.map { store in
                let item = readBack[store.key]
                return StoreConfirmation(landed: item?.value == store.value, readBack: item)
            }
        }
    }

    /// One id of a load: its lease, and what its read came to for the followers of its flight.
    struct Load {
        let id: Int64
        let key: String
        let flight: InFlightReads.Flight
        var lease = LeaseAttempt()
        var outcome = InFlightReads.Outcome.failed(.unavailable)
    }

    /// Puts a lease on every key where there is no entry, in one round trip (`add`s pipelined
    /// with one multi-get that reads them back), and says of each key whose lease is there. When
    /// the pipelined round trip fails (a node troubled or failing), one lease at a time, each
    /// through the circuit breaker.
    func takeLeases(keys: [String]) -> [String: LeaseAttempt] {
        var leases: [String: LeaseAttempt] = [:]
        guard keys.count > 1 else {
            for key in keys { leases[key] = attemptLease(key: key, replacingCAS: nil) }
            return leases
        }
        let newLeases = keys.map { newLease(for: $0) }
        let tokens = newLeases.map(\.token)
        let stores = newLeases.map(\.entry)
        switch cache.addAndGet(many: stores, flags: 0) {
        case .success(let items):
            for (key, token) in zip(keys, tokens) {
                // The lease read back is this reader's only if it carries its token.
                leases[key] = LeaseAttempt(readBack: items[key].map { .hit($0) } ?? .miss, token: token, shape: configuration.entryShape)
            }
        case .failure:
            for key in keys { leases[key] = attemptLease(key: key, replacingCAS: nil) }
        }
        return leases
    }

    /// ``storeLoaded(_:id:key:lease:flight:)`` for every load at once: the populates over the
    /// loads' leases go in one round trip (`cas`es pipelined with one multi-get), and a populate
    /// landed exactly when the entry read back is the value it stored — no other write can leave
    /// those bytes there, since a version names one content (§2.5) and a populate of an older
    /// row loses its `cas`. When the pipelined round trip fails, one populate at a time, as a
    /// single load's (a `cas` that did land is then reported lost: its flight's followers read
    /// for themselves, which is always safe). A load without a lease of its own, and one whose
    /// populate lost, settles its key before its row is answered (monotonic reads, §2.9).
    private func storeLoaded(_ loads: inout [Load], rows: [Int64: Profile]) {
        let leased = loads.indices.filter { loads[$0].lease.ownCAS != nil }
        guard leased.count > 1 else {
            for index in loads.indices {
                let load = loads[index]
                loads[index].outcome = storeLoaded(rows[load.id], id: load.id, key: load.key, lease: load.lease, flight: load.flight)
            }
            return
        }
        var stores: [MemcachedStore] = []
        for index in loads.indices {
            let load = loads[index]
            guard let leaseCAS = load.lease.ownCAS else {
                loads[index].outcome = storeLoaded(rows[load.id], id: load.id, key: load.key, lease: load.lease, flight: load.flight)
                continue
            }
            // Closed to new followers before the populate is sent (§2.1).
            shared.inFlight.close(load.id, flight: load.flight)
            let value = rows[load.id].map(CacheEntry.encode) ?? CacheEntry.encodedAbsent
            stores.append(
                MemcachedStore(key: load.key, value: value, expiration: configuration.jitteredTTLSeconds(using: &random), cas: leaseCAS))
        }
        let confirmed: [StoreConfirmation]
        switch storeConfirming(stores) {
        case .success(let confirmations):
            confirmed = confirmations
        case .failure(let error):
            statistics.record(.error)
            logger.debug("cache populates failed", metadata: ["error": "\(error)"])
            for index in leased {
                let load = loads[index]
                loads[index].outcome = storeLoaded(rows[load.id], id: load.id, key: load.key, lease: load.lease, flight: load.flight)
            }
            return
        }
        for (index, confirmation) in zip(leased, confirmed) {
            let load = loads[index]
            let landed = confirmation.landed
            statistics.record(landed ? .populateStored : .populateLost)
            if !landed {
                // What was read back is the key after the populate: settle from it, no look of its own.
                let lookup: MemcachedGetResult = confirmation.readBack.map { .hit($0) } ?? .miss
                settle(answering: rows[load.id], id: load.id, key: load.key, seenCAS: nil, lookup: lookup)
            }
            if let row = rows[load.id] {
                shared.hooks.afterPopulate?(load.id)
                loads[index].outcome = .found(row, populated: landed)
            } else {
                loads[index].outcome = .notFound
            }
        }
    }
}
