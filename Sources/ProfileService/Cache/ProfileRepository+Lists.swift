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
}
