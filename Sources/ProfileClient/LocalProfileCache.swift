/// What one ``ProfileClient`` knows per profile id: the read-your-writes entries, the version
/// tokens for `min_version`, the newest profile the service returned, and the optimistic
/// updates in flight, and which ids the service said do not exist. Every change of what is shown
/// for an id is published from here to its observers and to every observed list holding it, so
/// they see changes in the order this actor made them.
actor LocalProfileCache {
    private struct Intent {
        var sequence: UInt64
        /// `nil` when nothing was known about the profile to build the optimistic one from.
        var optimistic: Profile?
    }

    private struct Record {
        /// A profile this client wrote, and when it stops answering reads.
        var written: (profile: Profile, expires: ContinuousClock.Instant)?
        /// The version of this client's last write: the `min_version` of later reads.
        var minimumVersion: Int32?
        /// The newest profile the service returned (fetch, write or conflict).
        var confirmed: Profile?
        /// Updates in flight, oldest first.
        var intents: [Intent] = []
        /// Set when the service said the profile does not exist (a `deleted` event): the highest
        /// version known then. A profile at or below it is older than the deletion and is not
        /// shown; a profile created again is above it (versions continue past a deleted id's last,
        /// docs/design.md §2.5).
        var deletedAbove: Int32?

        /// The latest intent wins; with none in flight, the newest confirmed profile.
        var shown: Profile? {
            intents.last(where: { $0.optimistic != nil })?.optimistic ?? confirmed
        }

        /// What lists show for the id; `nil` while nothing is known.
        var member: ListMember? {
            if let shown { return .profile(shown) }
            return deletedAbove == nil ? nil : .missing
        }

        /// The highest committed version known (a deletion's included): a stream resumes above it.
        var floor: Int32? {
            let floor = max(confirmed?.version ?? 0, minimumVersion ?? 0, deletedAbove ?? 0)
            return floor > 0 ? floor : nil
        }
    }

    private let window: Duration
    private let now: @Sendable () -> ContinuousClock.Instant
    private let observers: ProfileObservers
    private let lists: ProfileListObservers
    private var records: [Int64: Record] = [:]
    private var nextSequence: UInt64 = 0

    init(
        window: Duration, observers: ProfileObservers, lists: ProfileListObservers,
        now: @escaping @Sendable () -> ContinuousClock.Instant
    ) {
        self.window = window
        self.observers = observers
        self.lists = lists
        self.now = now
    }

    /// The profile this client wrote for `id` while its window lasts and nothing newer is known.
    func writtenProfile(id: Int64) -> Profile? {
        guard let written = records[id]?.written else { return nil }
        guard written.expires > now() else {
            records[id]?.written = nil
            return nil
        }
        return written.profile
    }

    /// The version the next read of `id` must not go below (the client's last write), if any.
    func minimumVersion(id: Int64) -> Int32? {
        records[id]?.minimumVersion
    }

    /// The floor of each of `ids` the client knows one of: a multi-id stream resumes above it.
    func floors(for ids: [Int64]) -> [Int64: Int32] {
        var floors: [Int64: Int32] = [:]
        for id in ids { floors[id] = records[id]?.floor }
        return floors
    }

    /// Gives the observed lists what is known of `ids` now (a list that was just registered).
    func publishMembers(of ids: [Int64]) {
        var members: [Int64: ListMember] = [:]
        for id in ids { members[id] = records[id]?.member }
        lists.update(members)
    }

    /// A profile the service returned to a read, or in a 409: never hidden by an older local entry.
    func didFetch(_ profile: Profile) {
        confirm(profile)
        publish([profile.id])
    }

    /// A version the event stream announced (committed somewhere): shown like a fetch, and later
    /// reads of the id pass it as `min_version`, so they never answer older.
    func didReceiveEvent(_ profile: Profile) {
        apply(.profile(profile))
        publish([profile.id])
    }

    /// Events of a multi-id stream that arrived together: applied in one step, so each observed
    /// list holding them changes once.
    func didReceiveEvents(_ events: [ProfileStreamEvent]) {
        for event in events { apply(event) }
        publish(events.map(\.id))
    }

    /// A profile the service returned to this client's write: answers reads for the window.
    func didWrite(_ profile: Profile) {
        record(written: profile)
        publish([profile.id])
    }

    /// Starts an optimistic update and shows it to observers at once.
    /// - Returns: the intent's sequence number, for ``finishUpdate(id:sequence:outcome:)``.
    func beginUpdate(id: Int64, displayName: String, expectedVersion: Int32) -> UInt64 {
        nextSequence += 1
        var optimistic: Profile?
        if var base = records[id]?.shown ?? records[id]?.confirmed, expectedVersion < Int32.max {
            base.displayName = displayName
            base.version = expectedVersion + 1
            optimistic = base
        }
        records[id, default: Record()].intents.append(Intent(sequence: nextSequence, optimistic: optimistic))
        publish([id])
        return nextSequence
    }

    enum UpdateOutcome {
        case written(Profile)
        case conflict(current: Profile)
        case failed
    }

    /// Ends an intent: confirms it, rolls it back to the server's current profile (409), or
    /// drops it (failure: observers get the previous profile back unless a later intent shows).
    func finishUpdate(id: Int64, sequence: UInt64, outcome: UpdateOutcome) {
        records[id]?.intents.removeAll { $0.sequence == sequence }
        switch outcome {
        case .written(let profile):
            supersedeIntents(id: id, olderThan: sequence)
            record(written: profile)
        case .conflict(let current):
            supersedeIntents(id: id, olderThan: sequence)
            confirm(current)
        case .failed:
            break
        }
        publish([id])
    }

    // MARK: Private

    /// Once the service has answered an intent, older intents of the id are no longer shown,
    /// even while their requests are in flight: the latest intent wins.
    private func supersedeIntents(id: Int64, olderThan sequence: UInt64) {
        guard var intents = records[id]?.intents else { return }
        for index in intents.indices where intents[index].sequence < sequence {
            intents[index].optimistic = nil
        }
        records[id]?.intents = intents
    }

    private func apply(_ event: ProfileStreamEvent) {
        switch event {
        case .profile(let profile):
            confirm(profile)
            let minimum = max(records[profile.id]?.minimumVersion ?? 0, profile.version)
            records[profile.id]?.minimumVersion = minimum
        case .deleted(let id):
            var record = records[id, default: Record()]
            record.deletedAbove = record.floor ?? 0
            record.confirmed = nil
            record.written = nil
            records[id] = record
        }
    }

    private func confirm(_ profile: Profile) {
        var record = records[profile.id, default: Record()]
        if let deletedAbove = record.deletedAbove {
            guard profile.version > deletedAbove else { return }  // older than the deletion
            record.deletedAbove = nil
        }
        if record.confirmed.map({ $0.version <= profile.version }) ?? true {
            record.confirmed = profile
        }
        if let written = record.written, written.profile.version < profile.version {
            record.written = nil
        }
        records[profile.id] = record
    }

    private func record(written profile: Profile) {
        confirm(profile)
        var record = records[profile.id, default: Record()]
        record.minimumVersion = max(record.minimumVersion ?? 0, profile.version)
        if record.confirmed?.version == profile.version {
            record.written = (profile, now() + window)
        }
        records[profile.id] = record
    }

    /// Publishes what is shown for `ids` now: to each id's observers, and to the lists in one step.
    private func publish(_ ids: [Int64]) {
        var members: [Int64: ListMember] = [:]
        for id in ids {
            guard let record = records[id] else { continue }
            if let shown = record.shown {
                observers.publish(shown)
            } else if record.deletedAbove != nil {
                observers.forget(id)
            }
            members[id] = record.member
        }
        lists.update(members)
    }
}
