/// How a sampled change is judged after its delay (docs/design.md §3.8): a pure decision, so that
/// the rule reads — and is tested — apart from the I/O.
///
/// memcached is asked first; only an entry older than the change (or a cached profile of a deleted
/// row) is a *suspect*, and a suspect counts as a violation only once PostgreSQL confirms that the
/// row is newer than the entry: the entry may have been repaired meanwhile from a read that the
/// sample does not know of, and a change can be superseded by a later one.
public enum ConsistencyVerdict {
    /// What a check concludes (the `result` label of `profile_service_consistency_checks_total`).
    public enum Outcome: String, Sendable, CaseIterable {
        /// memcached holds no entry older than the change.
        case consistent
        /// memcached served, at the check, a version older than PostgreSQL's row (or a deleted
        /// row's profile): repaired, and logged.
        case violation
        /// memcached or PostgreSQL did not answer: nothing can be said.
        case inconclusive
        /// Not checked: the queue of sampled changes was full.
        case dropped
    }

    /// What memcached held for the id at the check.
    enum Cached: Equatable {
        case unreachable
        /// No entry, a reader's lease, or an entry this release does not decode: none is served.
        case nothing
        case profile(version: Int32)
        /// The service's record that no such profile exists (``CacheEntry/absent``): answered 404.
        case absent
    }

    /// What PostgreSQL holds for the id when a suspect is confirmed.
    enum Stored: Equatable {
        case unreachable
        case absent
        case row(version: Int32)
    }

    /// The verdict from memcached alone, or nil when PostgreSQL must confirm a suspect.
    /// - Parameter version: the sampled change's version; 0 for a deletion.
    static func judge(change version: Int32, cached: Cached) -> Outcome? {
        switch cached {
        case .unreachable: .inconclusive
        case .nothing: .consistent
        case .profile(let cachedVersion): version > 0 && cachedVersion >= version ? .consistent : nil
        case .absent: version > 0 ? nil : .consistent
        }
    }

    /// Whether a confirmed suspect is a violation at once, given the row it was confirmed
    /// against. A row that is gone is not: versions continue past a deleted row's last, so the
    /// entry may hold a profile created again after the sample's deletion, which a later deletion
    /// committed an instant ago made stale — within that deletion's own repair. The entry must
    /// stay unchanged a delay longer to count.
    static func confirmsAtOnce(_ stored: Stored) -> Bool {
        stored != .absent
    }

    /// The verdict on a suspect entry at `cachedVersion` (0: an absent entry), given the row.
    static func confirm(cachedVersion: Int32, stored: Stored) -> Outcome {
        switch stored {
        case .unreachable: .inconclusive
        case .absent: cachedVersion == 0 ? .consistent : .violation
        case .row(let version): version > cachedVersion ? .violation : .consistent
        }
    }
}
