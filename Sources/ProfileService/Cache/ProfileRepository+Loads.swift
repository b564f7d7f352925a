import Logging
import MemcachedClient

/// Loads (docs/design.md §2.1, §2.7): the misses of a batch read, populated under leases. Each id
/// joins the reads in flight in this process (a follower uses its leader's read), puts its lease
/// down before PostgreSQL is read, and populates with `cas` over that lease — so a write or an
/// eviction in between makes the late populate fail. A batch's leases go in one round trip, its
/// rows come from one query, its populates go in one round trip.
extension ProfileRepository {
    /// A read that loads, and the lease it loads under.
    struct LoadRequest {
        enum Lease {
            /// The lease sent with the read's first look, seen there as its own.
            case held(LeaseAttempt)
            /// A lease to put down where the key is free, or over the undecodable entry whose CAS
            /// value is given.
            case replacing(UInt64?)
        }

        let index: Int
        let lease: Lease
    }

    /// One id that leads its load.
    private struct Leader {
        let index: Int
        let id: Int64
        let key: String
        /// Nil for a reader that holds its lease already but found another reader of this process
        /// reading the id: it reads and populates itself, since following would leave its lease to
        /// block every other reader.
        let flight: InFlightReads.Flight?
        var lease: LeaseAttempt
        var outcome = InFlightReads.Outcome.failed(.unavailable)
    }

    /// Loads the reads at `loads` into `reads`' answers: the leaders' rows under their leases,
    /// then the followers' from their leaders' flights (after every leader of this batch has
    /// finished, so a batch never waits on itself).
    func load(_ loads: [LoadRequest], of reads: inout [KeyRead], since began: ContinuousClock.Instant)
        throws(ProfileStoreError)
    {
        var leaders: [Leader] = []
        var followers: [(index: Int, flight: InFlightReads.Flight)] = []
        var leasesToPut: [(index: Int, key: String, replacingCAS: UInt64?)] = []
        for load in loads {
            let read = reads[load.index]
            let role = shared.inFlight.join(read.id)
            switch (role, load.lease) {
            case (.follower(let flight), .replacing):
                followers.append((load.index, flight))
            case (.follower, .held(let lease)):
                leaders.append(Leader(index: load.index, id: read.id, key: read.key, flight: nil, lease: lease))
            case (.leader(let flight), .held(let lease)):
                leaders.append(Leader(index: load.index, id: read.id, key: read.key, flight: flight, lease: lease))
            case (.leader(let flight), .replacing(let replacingCAS)):
                leasesToPut.append((leaders.count, read.key, replacingCAS))
                leaders.append(Leader(index: load.index, id: read.id, key: read.key, flight: flight, lease: LeaseAttempt()))
            }
        }
        if !leaders.isEmpty {
            for (leader, lease) in zip(leasesToPut, putLeases(leasesToPut.map { ($0.key, $0.replacingCAS) })) {
                leaders[leader.index].lease = lease
            }
            let rows = try loadRows(&leaders, floors: floors(leaders.map(\.index), of: reads))
            for leader in leaders {
                reads[leader.index].answer = .success(rows[leader.id].map { Representation($0, outcome: .miss) })
            }
        }
        for follower in followers {
            let read = reads[follower.index]
            reads[follower.index].answer = Result { () throws(ProfileStoreError) in try follow(follower.flight, read, since: began) }
        }
    }

    /// Reads the leaders' rows and stores each under its lease; ends their flights with what that
    /// came to, for their followers.
    private func loadRows(_ leaders: inout [Leader], floors: [Int64: Int32]) throws(ProfileStoreError) -> [Int64: Profile] {
        defer {
            for leader in leaders {
                if let flight = leader.flight { shared.inFlight.finish(leader.id, flight: flight, outcome: leader.outcome) }
            }
        }
        for leader in leaders {
            shared.hooks.beforeDatabaseRead?(leader.id)
            leader.flight?.markReadStarted()
        }
        let rows: [Int64: Profile]
        do {
            // After every lease: a standby's rows must be as new as any version cached before (§8).
            rows = try readRows(ids: leaders.map(\.id), floors: floors, after: .now)
        } catch {
            for index in leaders.indices { leaders[index].outcome = .failed(error) }
            forget(leaders.filter { $0.lease.ownCAS != nil }.map(\.key))
            throw error
        }
        for leader in leaders { shared.hooks.afterDatabaseRead?(leader.id) }
        storeLoaded(&leaders, rows: rows)
        return rows
    }

    /// Stores what each leader read under its lease — the row, or the record that there is none
    /// (absence is cached like a row, §2.6: a storm of reads of ids that do not exist costs
    /// PostgreSQL one read per id, not one per request) — and sets its flight's outcome. Without a
    /// lease of its own a leader populates nothing, but settles the key (over the other reader's
    /// lease it found) before the row is answered; so does a leader whose populate lost (§2.9).
    private func storeLoaded(_ leaders: inout [Leader], rows: [Int64: Profile]) {
        var settlements: [Settlement] = []
        var populating: [Int] = []
        var stores: [MemcachedStore] = []
        for index in leaders.indices {
            let leader = leaders[index]
            let row = rows[leader.id]
            leaders[index].outcome = row.map { .found($0, populated: false) } ?? .notFound
            guard let leaseCAS = leader.lease.ownCAS else {
                if row != nil { statistics.record(.populateSkipped) }
                // A profile entry at the row's version or above before the read needs nothing: from
                // then on the key only grows, or empties and is filled by a later lease's reader.
                if let cachedVersion = leader.lease.cachedVersion, cachedVersion >= row?.version ?? 0 { continue }
                settlements.append(Settlement(id: leader.id, key: leader.key, row: row, seenCAS: leader.lease.othersCAS))
                continue
            }
            // Closed to new followers before the populate is sent: one that joined after the row
            // landed could miss a write acknowledged (and evicted) since (§2.1).
            if let flight = leader.flight { shared.inFlight.close(leader.id, flight: flight) }
            populating.append(index)
            stores.append(entryStore(row.map(CacheEntry.encode) ?? CacheEntry.encodedAbsent, key: leader.key, over: leaseCAS))
        }
        for (index, confirmation) in zip(populating, storeConfirming(stores)) {
            let leader = leaders[index]
            let row = rows[leader.id]
            switch confirmation {
            case .landed:
                statistics.record(.populateStored)
                if let row { leaders[index].outcome = .found(row, populated: true) }
            case .lost(let readBack):
                statistics.record(.populateLost)
                settlements.append(Settlement(id: leader.id, key: leader.key, row: row, seenCAS: nil, lookup: readBack))
            case .failed:
                // Whether it landed is unknown: its followers read for themselves.
                statistics.record(.populateLost)
            }
        }
        settle(settlements)
        for index in populating where rows[leaders[index].id] != nil { shared.hooks.afterPopulate?(leaders[index].id) }
    }

    /// Waits for another reader's PostgreSQL read in this process and uses it if it may.
    ///
    /// The wait is bounded, and so is the number of readers waiting (docs/design.md §5): a
    /// reader that cannot wait, or waited in vain, answers 503 rather than read the row itself —
    /// a read that is slow for the leader would be as slow for it, and could end up running in
    /// every worker.
    func follow(_ flight: InFlightReads.Flight, _ read: KeyRead, since began: ContinuousClock.Instant)
        throws(ProfileStoreError) -> Representation?
    {
        shared.hooks.willFollow?(read.id)
        let wait = flight.wait(timeout: configuration.coalescedWait, slots: shared.coalescedWaitSlots, since: began)
        // A batch of this one read, for the steps that read PostgreSQL themselves.
        var reads = [read]
        switch wait {
        case .usable(.found(let profile, _), let readAfterJoin):
            statistics.record(.coalesced)
            guard let floor = read.floor, profile.version < floor else { return Representation(profile, outcome: .miss) }
            // A row read after this request arrived is PostgreSQL's answer to its floor: the
            // floor is above every version there is, and the current row is the answer (§2.1).
            if readAfterJoin { return Representation(profile, outcome: .bypass) }
            statistics.record(.bypass)
            try readPast([PastRead(index: 0, cachedVersion: profile.version)], of: &reads, since: began)
        case .usable(.notFound, _):
            statistics.record(.coalesced)
            return nil
        case .usable(.failed(let error), _):
            statistics.record(.coalesced)
            throw error
        case .unusable:
            // The leader's row may predate this request: read it again, settling the key (§2.9).
            try readSettling([0], of: &reads, after: began)
        case .timedOut, .refused:
            throw gaveUpWaiting(wait)
        }
        return try reads[0].answered()
    }

    /// A wait for another reader's read that ended without an answer (it ran out, or no waiting
    /// place was free): counted, and the read is answered 503 rather than read again (§5.3).
    func gaveUpWaiting(_ wait: InFlightReads.Wait) -> ProfileStoreError {
        if case .refused = wait { statistics.record(.coalescedWaitRefused) } else { statistics.record(.coalescedWaitExpired) }
        return .unavailable
    }
}
