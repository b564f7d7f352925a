/// What a read does after each look at memcached (docs/design.md §2.1), as a value: what the
/// lookup found goes in, the next action comes out; no I/O. `ProfileRepository.read` does the
/// I/O each action names and looks again only after ``Action/waitAndLookAgain(_:)``.
enum ReadStep {
    /// What one lookup of the key found.
    enum Lookup: Equatable {
        /// A profile entry at this version.
        case profile(version: Int32)
        /// The record that no such profile exists (version 0, §2.6).
        case absent
        /// A lease this reader put down itself (sent with its first lookup).
        case ownLease
        /// Another reader's lease: it is reading PostgreSQL now.
        case othersLease
        /// An entry this release does not decode (another format version, garbage).
        case undecodable
        case miss
        /// memcached did not answer.
        case failed
    }

    enum Action: Equatable {
        /// Answer the cached profile (a hit).
        case answerCached
        /// Answer 404 from the record of absence.
        case answerAbsent
        /// The entry is below the reader's floor: read PostgreSQL (sharing a read that began
        /// after this one's) and bring the entry up.
        case bypass(cachedVersion: Int32)
        /// Our lease is in place: read the row and populate over it.
        case populateOverOwnLease
        /// Take a lease (replacing an undecodable entry when told) and populate, or follow a
        /// reader of this process that is reading the id already.
        case load(replacingUndecodable: Bool)
        /// Share the read another reader of this process is making.
        case followInFlight
        /// Another process's reader holds the lease: look again after this long.
        case waitAndLookAgain(Duration)
        /// Read PostgreSQL and answer without a lease of its own: the lease waits ran out (the row
        /// then replaces the lease waited on before it is answered, docs/design.md §2.9), or
        /// memcached failed (then the answer's outcome is `error`).
        case readWithoutPopulating(memcachedFailed: Bool)
    }

    /// The next action after a lookup.
    /// - Parameters:
    ///   - minVersion: the read's floor, if any.
    ///   - readingInProcess: a reader of this process is reading the id from PostgreSQL now.
    ///   - waits: the lease waits left; the one taken is removed.
    static func next(
        after lookup: Lookup, minVersion: Int32?, readingInProcess: Bool, waits: inout ArraySlice<Duration>
    ) -> Action {
        switch lookup {
        case .profile(let version):
            if let minVersion, version < minVersion { return .bypass(cachedVersion: version) }
            return .answerCached
        case .absent:
            // A floor means the client knows of a version: PostgreSQL is asked, past the record.
            return minVersion == nil ? .answerAbsent : .bypass(cachedVersion: 0)
        case .ownLease:
            return .populateOverOwnLease
        case .othersLease:
            if readingInProcess { return .followInFlight }
            if let wait = waits.popFirst() { return .waitAndLookAgain(wait) }
            return .readWithoutPopulating(memcachedFailed: false)
        case .undecodable:
            return .load(replacingUndecodable: true)
        case .miss:
            return .load(replacingUndecodable: false)
        case .failed:
            return .readWithoutPopulating(memcachedFailed: true)
        }
    }
}
