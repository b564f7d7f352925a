import MemcachedClient

/// Lists of profiles (docs/design.md §2.7): one multi-get for every member, one PostgreSQL query
/// for the members memcached has no entry for, and each member by the rules of a single read.
extension ProfileRepository {
    /// The members of a list, in its order (`nil`: no such profile).
    ///
    /// Every entry is looked up in one multi-get (one round trip per node). A cached profile at
    /// its floor is answered from it; the members with no entry at all are loaded together — each
    /// under its own lease and in-flight read, as ``read(id:minVersion:)`` loads one, their rows
    /// read with one query; every other member (a recorded absence, an entry below its floor,
    /// another reader's lease, a failed node) is read as ``read(id:minVersion:)`` reads one. So a
    /// list keeps every rule a single read keeps.
    ///
    /// - Throws: ``ProfileStoreError/unavailable`` when a member needs PostgreSQL and it is down.
    public func read(_ list: ProfileListRequest) throws(ProfileStoreError) -> [Representation?] {
        try prefetching(ids: list.members.map(\.id), whileMissesAreCommon: true) { () throws(ProfileStoreError) -> [Representation?] in
            let missing = list.members.filter { if case .missing? = prefetched[$0.id] { true } else { false } }
            let loaded = missing.count > 1 ? try loadMissing(missing) : [:]
            var answers: [Representation?] = []
            answers.reserveCapacity(list.members.count)
            var hits = 0
            defer { statistics.record(.hit, count: hits) }
            for member in list.members {
                if let answer = loaded[member.id] {
                    // A row read after the list arrived: at or above any floor PostgreSQL can meet.
                    answers.append(answer)
                } else if case .profile(let item, let version)? = prefetched[member.id], version >= member.floor ?? 0,
                    case .profile(_, let json)? = CacheEntry(decoding: item.value)
                {
                    // ReadStep's answerCached, without building the key and looking again.
                    prefetched[member.id] = nil
                    readStrategy.record(miss: false)
                    hits += 1
                    answers.append(Representation(version: version, json: Array(json), cacheOutcome: .hit))
                } else {
                    answers.append(try read(id: member.id, minVersion: member.floor))
                }
            }
            return answers
        }
    }

    /// Loads members memcached had no entry for, as `load` loads one — each joins the reads in
    /// flight in this process and puts its lease down before PostgreSQL is read, and populates
    /// under that lease — but the leaders' rows come from one query. Members another reader of
    /// this process is loading are left out (their read follows that one).
    ///
    /// - Returns: the answer of each member loaded here (`nil` inside: no such profile).
    private func loadMissing(_ members: [ProfileListRequest.Member]) throws(ProfileStoreError) -> [Int64: Representation?] {
        struct Leader {
            let id: Int64
            let key: String
            let flight: InFlightReads.Flight
            var leaseCAS: UInt64?
            var outcome = InFlightReads.Outcome.failed(.unavailable)
        }
        var leaders: [Leader] = []
        var floors: [Int64: Int32] = [:]
        for member in members {
            let id = member.id
            guard case .leader(let flight) = shared.inFlight.join(id) else { continue }
            floors[id] = member.floor
            prefetched[id] = nil
            let key = configuration.key(for: id)
            leaders.append(Leader(id: id, key: key, flight: flight))
        }
        defer { for leader in leaders { shared.inFlight.finish(leader.id, flight: leader.flight, outcome: leader.outcome) } }
        guard !leaders.isEmpty else { return [:] }

        for index in leaders.indices {
            readStrategy.record(miss: true)
            statistics.record(.miss)
            leaders[index].leaseCAS = takeLease(key: leaders[index].key, replacingCAS: nil)
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
                if leaders[index].leaseCAS != nil { _ = cache.delete(leaders[index].key) }
            }
            throw error
        }

        var answers: [Int64: Representation?] = [:]
        for index in leaders.indices {
            let leader = leaders[index]
            shared.hooks.afterDatabaseRead?(leader.id)
            let row = rows[leader.id]
            leaders[index].outcome = storeLoaded(
                row, id: leader.id, key: leader.key, leaseCAS: leader.leaseCAS, flight: leader.flight)
            answers[leader.id] = .some(row.map { Representation($0, outcome: .miss) })
        }
        return answers
    }
}
