import MemcachedClient
import ServiceRuntime

/// Lists of profiles (docs/design.md §2.7): one multi-get for every member, one PostgreSQL query
/// for the members memcached has no entry for, and each member by the rules of a single read.
extension ProfileRepository {
    /// The members of a list, in its order (`nil`: no such profile).
    ///
    /// Every entry is looked up in one multi-get (one round trip per node). A cached profile at
    /// its floor is answered from it; the members with no entry at all are loaded together — each
    /// under its own lease and in-flight read, as ``read(id:minVersion:)`` loads one, their rows
    /// read with one query; every other member (a recorded absence, an entry below its floor,
    /// another reader's lease, a failed node) is read as ``read(id:minVersion:)`` reads one — and
    /// the members whose entries are below their floors are read past the cache together first
    /// (``readPastTogether(_:since:)``). So a list keeps every rule a single read keeps.
    ///
    /// - Throws: ``ProfileStoreError/unavailable`` when a member needs PostgreSQL and it is down.
    public func read(_ list: ProfileListRequest) throws(ProfileStoreError) -> [Representation?] {
        // A row read past the cache after this instant answers every floor of the list.
        let began = ContinuousClock.now
        let prefetched = prefetch(ids: list.members.map(\.id), whileMissesAreCommon: true)
        let missing = list.members.filter { if case .missing? = prefetched[$0.id] { true } else { false } }
        var loaded = missing.count > 1 ? try loadMissing(missing) : [:]
        let belowFloor = list.members.compactMap { member in
            Self.cachedVersion(of: prefetched[member.id], belowFloorOf: member).map { (member, $0) }
        }
        if belowFloor.count > 1 {
            for (id, answer) in try readPastTogether(belowFloor, since: began) { loaded[id] = answer }
        }
        var answers: [Representation?] = []
        answers.reserveCapacity(list.members.count)
        var hits = 0
        defer { statistics.record(.hit, count: hits) }
        for member in list.members {
            if let answer = loaded[member.id] {
                // A row read after the list arrived: at or above any floor PostgreSQL can meet.
                answers.append(answer)
            } else if case .profile(let item, let version)? = prefetched[member.id], version >= member.floor ?? 0,
                case .profile(_, let json)? = CacheEntry(decoding: item.value, shape: configuration.entryShape)
            {
                // ReadStep's answerCached, without building the key and looking again.
                readStrategy.record(miss: false)
                hits += 1
                answers.append(Representation(version: version, json: Array(json), cacheOutcome: .hit))
            } else {
                answers.append(try read(id: member.id, minVersion: member.floor, batched: prefetched[member.id].map { .prefetched($0) }))
            }
        }
        return answers
    }

    /// The version of `member`'s prefetched entry when it is below the member's floor (a
    /// recorded absence counts as version 0): such a member is read past the cache.
    private static func cachedVersion(of prefetched: Prefetch?, belowFloorOf member: ProfileListRequest.Member) -> Int32? {
        guard let floor = member.floor else { return nil }
        switch prefetched {
        case .profile(_, let version)? where version < floor: return version
        case .absent?: return 0
        default: return nil
        }
    }

    /// Reads the members whose entries are below their floors past the cache together, as
    /// `bypass` reads one (§2.1): each joins the reads past the cache in flight in this process;
    /// the leaders wait for their turn (``ProfileCacheConfiguration/floorReadSpacing``) once, for
    /// all of them, and read their rows with one query, settle each entry a newer row replaces,
    /// and end their flights before this list waits for anyone else's — so two lists that lead
    /// and follow each other never wait on each other. A member another reader is reading uses
    /// that read if it began after this list arrived (or meets the floor), else it is read alone.
    ///
    /// - Returns: the answers of the members read here (`nil` inside: no such profile).
    private func readPastTogether(
        _ members: [(member: ProfileListRequest.Member, cachedVersion: Int32)], since began: ContinuousClock.Instant
    ) throws(ProfileStoreError) -> [Int64: Representation?] {
        var leaders: [(id: Int64, cachedVersion: Int32, flight: InFlightReads.Flight)] = []
        var followers: [(member: ProfileListRequest.Member, flight: InFlightReads.Flight)] = []
        var floors: [Int64: Int32] = [:]
        for (member, cachedVersion) in members {
            statistics.record(.bypass)
            switch shared.inFlight.join(member.id) {
            case .leader(let flight):
                leaders.append((member.id, cachedVersion, flight))
                floors[member.id] = member.floor
            case .follower(let flight):
                followers.append((member, flight))
            }
        }
        var answers: [Int64: Representation?] = [:]
        if !leaders.isEmpty {
            var outcomes: [Int64: InFlightReads.Outcome] = [:]
            defer {
                for leader in leaders {
                    shared.inFlight.finish(leader.id, flight: leader.flight, outcome: outcomes[leader.id] ?? .failed(.unavailable))
                }
            }
            let turn = leaders.map { shared.inFlight.turnToReadPastCache($0.id, spacing: configuration.floorReadSpacing) }.max()!
            let wait = ContinuousClock.now.duration(to: turn)
            if wait > .zero { sleepThread(for: wait) }
            for leader in leaders { leader.flight.markReadStarted() }
            let rows = try readRows(ids: leaders.map(\.id), floors: floors, after: .now)
            for leader in leaders {
                let row = rows[leader.id]
                if let row, row.version > leader.cachedVersion {
                    settle(answering: row, id: leader.id, key: configuration.key(for: leader.id), seenCAS: nil)
                }
                outcomes[leader.id] = row.map { .found($0, populated: false) } ?? .notFound
                answers[leader.id] = .some(row.map { Representation($0, outcome: .bypass) })
            }
        }
        for (member, flight) in followers {
            let wait = flight.wait(timeout: configuration.coalescedWait, slots: shared.coalescedWaitSlots, since: began)
            switch wait {
            case .usable(.found(let profile, _), let readAfterJoin) where readAfterJoin || profile.version >= member.floor ?? 0:
                statistics.record(.coalesced)
                answers[member.id] = .some(Representation(profile, outcome: .bypass))
            case .usable(.notFound, readAfterJoin: true):
                statistics.record(.coalesced)
                answers[member.id] = .some(nil)
            case .usable(.failed(let error), _):
                throw error
            case .timedOut, .refused:
                throw gaveUpWaiting(wait)
            case .usable, .unusable:
                break  // the list reads it alone, as a single read would
            }
        }
        return answers
    }
}
