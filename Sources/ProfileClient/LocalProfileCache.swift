/// What one ``ProfileClient`` knows per profile id: the read-your-writes entries, the version
/// tokens for `min_version`, the newest profile the service returned, and the optimistic
/// updates in flight. Every change of the profile shown for an id is published to its observers
/// from here, so they see changes in the order this actor made them.
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

        /// The latest intent wins; with none in flight, the newest confirmed profile.
        var shown: Profile? {
            intents.last(where: { $0.optimistic != nil })?.optimistic ?? confirmed
        }
    }

    private let window: Duration
    private let now: @Sendable () -> ContinuousClock.Instant
    private let observers: ProfileObservers
    private var records: [Int64: Record] = [:]
    private var nextSequence: UInt64 = 0

    init(window: Duration, observers: ProfileObservers, now: @escaping @Sendable () -> ContinuousClock.Instant) {
        self.window = window
        self.observers = observers
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

    /// A profile the service returned to a read, or in a 409: never hidden by an older local entry.
    func didFetch(_ profile: Profile) {
        confirm(profile)
        publish(id: profile.id, fallback: profile)
    }

    /// A version the event stream announced (committed somewhere): shown like a fetch, and later
    /// reads of the id pass it as `min_version`, so they never answer older.
    func didReceiveEvent(_ profile: Profile) {
        confirm(profile)
        records[profile.id, default: Record()].minimumVersion = max(
            records[profile.id]?.minimumVersion ?? 0, profile.version)
        publish(id: profile.id, fallback: profile)
    }

    /// A profile the service returned to this client's write: answers reads for the window.
    func didWrite(_ profile: Profile) {
        record(written: profile)
        publish(id: profile.id, fallback: profile)
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
        publish(id: id, fallback: nil)
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
        publish(id: id, fallback: nil)
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

    private func confirm(_ profile: Profile) {
        var record = records[profile.id, default: Record()]
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

    private func publish(id: Int64, fallback: Profile?) {
        if let shown = records[id]?.shown ?? fallback {
            observers.publish(shown)
        }
    }
}
