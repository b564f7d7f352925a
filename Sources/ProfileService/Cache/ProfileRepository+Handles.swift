import ServiceRuntime
import MemcachedClient

/// Lookups by handle (docs/design.md §12), over a batch of handles like every step of the cache
/// protocol. A handle's entry is a *hint* — the profile that held the handle, or for whom it is
/// kept — and the profile, read by the protocol of §2, is the proof: a lookup answers a profile
/// only when the profile itself carries the handle. So an entry left behind by a rename, a
/// deletion or a psql `UPDATE` can send a lookup to PostgreSQL, never to the wrong person, and the
/// change feed needs no old username: an old handle's entry contradicts its profile and is
/// replaced by the next lookup. A handle's entry that says "no one" (`absent`) is trusted only
/// without a floor, and every holder's new handle is invalidated by its writer and the feed.
extension ProfileRepository {
    /// What a handle names.
    public enum HandleAnswer {
        /// The profile that holds it, by the rules of a read by id (its floor included).
        case profile(id: Int64, Representation)
        /// Kept for the profile `id`, which renamed away: it is now called `username`.
        case moved(id: Int64, username: String)
        /// No profile holds it (or the one it is kept for is deleted).
        case nobody
    }

    /// Looks up one handle, answering no older than `minVersion`.
    public func lookUp(_ handle: ProfileHandle, minVersion: Int32?) throws(ProfileStoreError) -> HandleAnswer {
        try lookUp([(handle, minVersion)])[handle] ?? .nobody
    }

    /// Looks up distinct handles, each no older than its floor, by handle: one multi-get of their
    /// entries, one of the profiles they name, and — for the handles whose entries prove nothing —
    /// one query and one more read of profiles.
    public func lookUp(_ handles: [(handle: ProfileHandle, floor: Int32?)]) throws(ProfileStoreError) -> [ProfileHandle: HandleAnswer] {
        try lookUp(handles, waitingOnRacers: true)
    }

    /// ``lookUp(_:)``; `waitingOnRacers`: a handle whose lease another reader put down first (a
    /// race for an empty key) is looked up again, waiting on that reader, rather than read.
    private func lookUp(
        _ handles: [(handle: ProfileHandle, floor: Int32?)], waitingOnRacers: Bool
    ) throws(ProfileStoreError) -> [ProfileHandle: HandleAnswer] {
        cache.beginRequest()
        let keys = handles.map { configuration.key(for: $0.handle) }
        let looks = lookPastLeases(keys)
        var answers: [ProfileHandle: HandleAnswer] = [:]
        // Each handle whose entry names a profile, to be checked against that profile.
        var hinted: [(index: Int, id: Int64, reservedUntil: Int64)] = []
        var unresolved: [Unresolved] = []
        for (index, look) in looks.enumerated() {
            switch look.entry {
            case .handle(let id, let until)?:
                hinted.append((index, id, until))
            case .absent? where handles[index].floor == nil:
                statistics.record(.handleAbsentHit)
                answers[handles[index].handle] = .nobody
            case .absent?, .profile?:
                // A floor asks more than an absence proves; another kind is no handle's entry.
                unresolved.append(Unresolved(index: index, storeOver: look.cas))
            case .lease?:
                unresolved.append(Unresolved(index: index, storeOver: nil))
            case nil:
                let isMiss = if case .miss = look.found { true } else { false }
                unresolved.append(Unresolved(index: index, storeOver: look.cas, leaseFirst: isMiss))
            }
        }
        let profiles = try readProfiles(hinted.map { ($0.id, handles[$0.index].floor) })
        let now = Self.millisecondsSince1970()
        for hint in hinted {
            let handle = handles[hint.index].handle
            if let answer = verdict(on: handle, heldBy: hint.id, reservedUntil: hint.reservedUntil, profile: profiles[hint.id] ?? nil, now: now) {
                answers[handle] = answer
            } else {
                // PostgreSQL says, and its answer replaces this entry if it is still there.
                unresolved.append(Unresolved(index: hint.index, storeOver: looks[hint.index].cas))
            }
        }
        guard !unresolved.isEmpty else { return answers }
        for (handle, answer) in try resolve(unresolved, of: handles, keys: keys, waitingOnRacers: waitingOnRacers) {
            answers[handle] = answer
        }
        return answers
    }

    /// What a handle's entry naming profile `id` (held, or kept until `reservedUntil`) comes to
    /// once the profile is read (nil: no such profile): the profile when it carries the handle; a
    /// move (or nobody, the profile gone) while the handle is kept for it; nil when the entry
    /// contradicts its profile — a rename, a deletion, a reservation that ended — and proves nothing.
    private func verdict(
        on handle: ProfileHandle, heldBy id: Int64, reservedUntil: Int64, profile: Representation?, now: Int64
    ) -> HandleAnswer? {
        if let profile, profile.carries(handle) {
            statistics.record(.handleHit)
            shared.handleHints.record(handle, heldBy: id)
            return .profile(id: id, profile)
        }
        guard reservedUntil > now else { return nil }
        statistics.record(.handleHit)
        return profile?.username.map { .moved(id: id, username: $0) } ?? .nobody
    }

    /// The profiles this process last answered `handles` with: hints (``HandleHints``), for a batch
    /// to read beside its reads by id (``lookUp(_:hints:prefetched:)``).
    public func handleHints(_ handles: [ProfileHandle]) -> [ProfileHandle: Int64] {
        var hints: [ProfileHandle: Int64] = [:]
        for handle in handles { hints[handle] = shared.handleHints.id(for: handle) }
        return hints
    }

    /// The lookups a batch's multi-get decided by their hints: the hinted profile's entry, read in
    /// the batch's multi-get (``prefetch(ids:)``), answers the floor and carries the handle. The
    /// others are left out, for the handle's entry to decide.
    public func lookUp(
        _ handles: [(handle: ProfileHandle, floor: Int32?)], hints: [ProfileHandle: Int64], prefetched: [Int64: Prefetch]
    ) -> [ProfileHandle: HandleAnswer] {
        var answers: [ProfileHandle: HandleAnswer] = [:]
        for (handle, floor) in handles {
            guard let id = hints[handle], let entry = prefetched[id], case .cached = entry, entry.answers(minVersion: floor),
                let profile = try? read(id: id, minVersion: floor, batched: .prefetched(entry)), profile.carries(handle)
            else { continue }
            statistics.record(.handleHit)
            answers[handle] = .profile(id: id, profile)
        }
        return answers
    }

    /// The lookups of `handles` that memcached answers alone — a record that no one holds the
    /// handle, or its entry and the profile it names, both hits that decide — for a batch of
    /// requests taken together (docs/design.md §6, §12); the others are left out, to be looked up
    /// alone. No lease, no wait, no PostgreSQL: the batch lane never waits on them. Nothing is
    /// looked up while this worker's reads mostly miss (as ``prefetch(ids:)``).
    public func lookUpFromCache(_ handles: [(handle: ProfileHandle, floor: Int32?)]) -> [ProfileHandle: HandleAnswer] {
        guard !handles.isEmpty, !readStrategy.leaseFirst else { return [:] }
        cache.beginRequest()
        var answers: [ProfileHandle: HandleAnswer] = [:]
        var hinted: [(handle: ProfileHandle, floor: Int32?, id: Int64, reservedUntil: Int64)] = []
        for ((handle, floor), look) in zip(handles, look(handles.map { configuration.key(for: $0.handle) })) {
            switch look.entry {
            case .handle(let id, let until)?:
                hinted.append((handle, floor, id, until))
            case .absent? where floor == nil:
                statistics.record(.handleAbsentHit)
                answers[handle] = .nobody
            default:
                continue
            }
        }
        let profiles = prefetch(ids: Array(Set(hinted.map(\.id))))
        let now = Self.millisecondsSince1970()
        for hint in hinted {
            // Only an entry that answers the floor: a read handed it needs no round trip.
            guard let prefetched = profiles[hint.id], case .cached = prefetched, prefetched.answers(minVersion: hint.floor),
                let profile = try? read(id: hint.id, minVersion: hint.floor, batched: .prefetched(prefetched)),
                let answer = verdict(on: hint.handle, heldBy: hint.id, reservedUntil: hint.reservedUntil, profile: profile, now: now)
            else { continue }
            answers[hint.handle] = answer
        }
        return answers
    }

    /// Looks at `keys`, and again at those that hold another reader's lease after each of the
    /// lease waits (§2.1: 2, 4, 8, 16 ms), so lookups of one name that no entry answers yet wait
    /// for the one that reads PostgreSQL rather than each reading it.
    private func lookPastLeases(_ keys: [String]) -> [Look] {
        var looks = look(keys)
        for wait in configuration.leaseWaits {
            let leased = looks.indices.filter { if case .lease? = looks[$0].entry { true } else { false } }
            guard !leased.isEmpty else { break }
            statistics.record(.leaseWait)
            sleepThread(for: wait)
            for (index, again) in zip(leased, look(leased.map { keys[$0] })) { looks[index] = again }
        }
        return looks
    }

    /// A handle whose entry proved nothing: PostgreSQL answers, and the answer is stored over the
    /// entry seen (`storeOver`, its CAS value), or under a new lease where the key was empty.
    private struct Unresolved {
        let index: Int
        let storeOver: UInt64?
        var leaseFirst = false
    }

    /// Asks PostgreSQL about `unresolved` in one query, stores what it says in their entries, and
    /// reads the profiles it names by the rules of §2 — a holder no older than the version at
    /// which PostgreSQL showed it holding the handle.
    private func resolve(
        _ unresolved: [Unresolved], of handles: [(handle: ProfileHandle, floor: Int32?)], keys: [String], waitingOnRacers: Bool
    ) throws(ProfileStoreError) -> [ProfileHandle: HandleAnswer] {
        // Leases first, for the empty keys: a rename's invalidation after this read deletes the
        // lease, so what this read stores cannot hide it (§2.1).
        var unresolved = unresolved
        var leasing = unresolved.filter(\.leaseFirst)
        var leases = putLeases(leasing.map { (keys[$0.index], nil) })
        var answers: [ProfileHandle: HandleAnswer] = [:]
        let racedFor = zip(leasing, leases).filter { $0.1.ownCAS == nil }.map(\.0.index)
        if waitingOnRacers, !racedFor.isEmpty {
            // Another reader's lease (or its answer) got there first: wait on it, as after a look.
            for (handle, answer) in try lookUp(racedFor.map { handles[$0] }, waitingOnRacers: false) { answers[handle] = answer }
            let raced = Set(racedFor)
            unresolved.removeAll { raced.contains($0.index) }
            let kept = zip(leasing, leases).filter { !raced.contains($0.0.index) }
            leasing = kept.map(\.0)
            leases = kept.map(\.1)
            guard !unresolved.isEmpty else { return answers }
        }
        var storeOver: [Int: UInt64] = [:]
        for (entry, lease) in zip(leasing, leases) { if let cas = lease.ownCAS { storeOver[entry.index] = cas } }
        for entry in unresolved where !entry.leaseFirst { if let cas = entry.storeOver { storeOver[entry.index] = cas } }

        statistics.record(.handleDatabaseRead, count: unresolved.count)
        let records: [ProfileHandle: HandleRecord]
        do {
            records = try store.handles(unresolved.map { handles[$0.index].handle })
        } catch {
            forget(zip(leasing, leases).filter { $0.1.ownCAS != nil }.map { keys[$0.0.index] })
            throw error
        }
        var stores: [MemcachedStore] = []
        for entry in unresolved {
            guard let cas = storeOver[entry.index] else { continue }
            let value: [UInt8] =
                switch records[handles[entry.index].handle] {
                case .held(let id, _)?: CacheEntry.encodeHandle(id: id, reservedUntil: 0)
                case .reserved(let id, let until)?: CacheEntry.encodeHandle(id: id, reservedUntil: until)
                case nil: CacheEntry.encodedAbsent
                }
            stores.append(entryStore(value, key: keys[entry.index], over: cas))
        }
        _ = storeConfirming(stores)

        var reading: [(id: Int64, floor: Int32?)] = []
        for entry in unresolved {
            let floor = handles[entry.index].floor
            switch records[handles[entry.index].handle] {
            case .held(let id, let version)?: reading.append((id, max(floor ?? 0, version)))
            case .reserved(let id, _)?: reading.append((id, floor))
            case nil: break
            }
        }
        let profiles = try readProfiles(reading)
        for entry in unresolved {
            let handle = handles[entry.index].handle
            guard let record = records[handle] else {
                answers[handle] = .nobody
                continue
            }
            let id: Int64 =
                switch record {
                case .held(let id, _), .reserved(let id, _): id
                }
            // A holder renamed away since the query keeps the handle reserved: it moved.
            guard let profile = profiles[id] ?? nil, let username = profile.username else {
                answers[handle] = .nobody
                continue
            }
            answers[handle] = profile.carries(handle) ? .profile(id: id, profile) : .moved(id: id, username: username)
        }
        return answers
    }

    /// The profiles of `reads` by the rules of §2, one batch, by id (nil: no such profile).
    private func readProfiles(_ reads: [(id: Int64, floor: Int32?)]) throws(ProfileStoreError) -> [Int64: Representation?] {
        guard !reads.isEmpty else { return [:] }
        let list = ProfileListRequest(mentions: reads.map { ProfileListRequest.Member(id: $0.id, floor: $0.floor) })
        let answers = try read(list)
        var profiles: [Int64: Representation?] = [:]
        for (member, answer) in zip(list.members, answers) { profiles[member.id] = answer }
        return profiles
    }

    /// After a write that gave a profile `username` (a creation, a rename): the entry of its
    /// handle is deleted, so no record of "no one" or of an earlier holder answers it again
    /// (docs/design.md §12); the handle given up needs nothing, its entry contradicts the profile.
    func handleTaken(_ username: String) {
        guard let handle = ProfileHandle(username: username) else { return }
        forget([configuration.key(for: handle)])
    }

    /// The change feed's repair of handles (docs/design.md §12): for each changed row, the entry of
    /// the handle it holds is left when it names the row's profile as holder, and deleted
    /// otherwise (a record of "no one", an earlier holder, a reservation, a lease). One multi-get
    /// for the batch.
    ///
    /// - Returns: the ids of the changes whose repair memcached did not answer (to hold and retry).
    public func repairHandles(after changes: [ProfileChange]) -> Set<Int64> {
        var owners: [(id: Int64, key: String)] = []
        for case .changed(let id, _, let row?) in changes {
            guard let handle = ProfileHandle(username: row.username) else { continue }
            owners.append((id, configuration.key(for: handle)))
        }
        guard !owners.isEmpty else { return [] }
        var failed: Set<Int64> = []
        var stale: [(id: Int64, key: String)] = []
        for (owner, look) in zip(owners, look(owners.map(\.key))) {
            switch (look.found, look.entry) {
            case (.miss, _): continue
            case (.failure, _): failed.insert(owner.id)
            case (_, .handle(let id, 0)?) where id == owner.id: continue
            default: stale.append(owner)
            }
        }
        for (owner, result) in zip(stale, forget(stale.map(\.key))) {
            if case .failure = result { failed.insert(owner.id) }
        }
        return failed
    }

    static func millisecondsSince1970() -> Int64 {
        let now = WallClock.now()
        return Int64(now.seconds) * 1000 + Int64(now.nanoseconds) / 1_000_000
    }
}

extension ProfileRepository.Representation {
    /// The profile's username, read from its JSON: the service writes it second, after the id
    /// (`{"id":7,"username":"…`), and a username needs no escapes (``ProfileValidation/isUsername(_:)``).
    /// Nil when the JSON does not have it so (a name a psql statement gave that needs escapes):
    /// such a profile answers no lookup, as its name is no handle.
    var username: String? {
        usernameBytes.map { String(decoding: json.publicView[$0], as: UTF8.self) }
    }

    /// Whether the username spells `handle`, compared in place (a lookup's hot path).
    func carries(_ handle: ProfileHandle) -> Bool {
        guard let range = usernameBytes else { return false }
        return handle.isSpelled(by: json.publicView[range])
    }

    private static let usernameMember = Array(#","username":""#.utf8)

    /// Where the username lies in the public view (``ProfileJSON/publicView``).
    private var usernameBytes: Range<Int>? {
        let publicJSON = json.publicView
        var index = publicJSON.startIndex + 6  // past `{"id":`
        guard publicJSON.count > 6, publicJSON[..<index].elementsEqual(#"{"id":"#.utf8) else { return nil }
        while index < publicJSON.endIndex, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(publicJSON[index]) { index += 1 }
        let marker = Self.usernameMember
        guard publicJSON.endIndex - index > marker.count, publicJSON[index..<index + marker.count].elementsEqual(marker) else { return nil }
        let start = index + marker.count
        guard let end = publicJSON[start...].firstIndex(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }),
            publicJSON[end] == UInt8(ascii: "\"")
        else { return nil }
        return start..<end
    }
}
