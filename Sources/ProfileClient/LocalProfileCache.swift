/// What one ``ProfileClient`` knows per profile id: the read-your-writes entries, the newest
/// confirmed profile and the floor every later read passes, the optimistic edits in flight, and
/// which ids the service said do not exist. Every change of what is shown for an id is published
/// from here to its observers and to every observed list holding it, so they see changes in the
/// order this actor made them.
///
/// Two rules keep the screen from going back:
/// - Every version the client learns (a fetch, a list, a write, a 409's `current`, an event)
///   raises the id's floor and replaces the confirmed profile only when newer; reads return the
///   newer of the answer and the confirmed profile.
/// - An optimistic profile is shown only while it is newer than the confirmed one.
actor LocalProfileCache {
    struct Intent {
        var sequence: UInt64
        /// The name it sets, if it sets one.
        var displayName: String?
        /// The username it sets (a rename), if it sets one.
        var username: String? = nil
        /// The fields it sets (`nil`: unsets).
        var fields: [String: String?] = [:]
        /// The version the edit was made over: the one the caller expects
        /// (``ProfileClient/updateDisplayName(id:to:expectedVersion:)``), or the confirmed version
        /// the user saw when making a serialized edit (``ProfileClient/setDisplayName(_:id:)``);
        /// `nil` when no version was known: such an edit is shown once the id's first confirmed
        /// version arrives (a serialized edit reads it first), and stands over that version.
        var base: Int32?
        /// A patch without a version (``ProfileClient/setFields(_:id:expectedVersion:)``): the
        /// service applies it over whichever version it holds, so it is shown over whichever is
        /// confirmed — until a confirmed version above ``base`` already holds what it sets (its
        /// own event, most likely), which then stands for it.
        var floats = false

        /// Whether `profile` holds every value this edit sets.
        func isHeld(by profile: Profile) -> Bool {
            displayName.map { $0 == profile.displayName } ?? true
                && username.map { $0 == profile.username } ?? true
                && fields.allSatisfy { name, value in profile.fields[name] == value }
        }
    }

    struct Record {
        /// A profile this client wrote, and when it stops answering reads.
        var written: (profile: Profile, expires: ContinuousClock.Instant)?
        /// The newest profile the service returned (fetch, list, write, conflict, event).
        var confirmed: Profile?
        /// The entity tag the service sent with ``confirmed`` (`"7"` for the owner's view,
        /// `"7-public"` for everyone else's while some field is owner-only), sent back in
        /// `If-None-Match` as it was: a tag the client made could match the other view's, and a
        /// 304 would then answer with the wrong one. `nil` when it came without one (a list, an
        /// event, a write, a 409, or a store written before tags were kept).
        var confirmedTag: String?
        /// The highest committed version known, a deletion's included: the `min_version` of reads
        /// and the resume point of streams.
        var floor: Int32 = 0
        /// Edits in flight or waiting, oldest first.
        var intents: [Intent] = []
        /// Set when the service said the profile does not exist: the floor then. A profile at or
        /// below it is older than the deletion and is not shown; a profile created again is above
        /// it (versions continue past a deleted id's last, docs/design.md §2.5).
        var deletedAbove: Int32?
        /// When the record was last read or changed, for eviction (a counter, not a clock).
        var lastUse: UInt64 = 0

        /// What is shown: from the confirmed profile, the newest intent made over its version, as
        /// the version it would become (pending), then the newest made over that one, and so on —
        /// an edit waiting behind one in flight stands over the version the first will write. An
        /// intent over any other version is not shown. So a newer confirmed version — another
        /// device's change, or an edit's own event arriving before its answer — is shown as it is,
        /// at once, and no version is shown that the service could not write next. Patches without
        /// a version (floating) come last, each over what is shown so far, oldest first.
        var shown: (profile: Profile, isPending: Bool)? {
            guard var shown = confirmed else { return nil }
            var isPending = false
            func show(_ intent: Intent) {
                if let displayName = intent.displayName { shown.displayName = displayName }
                if let username = intent.username { shown.username = username }
                for (name, value) in intent.fields { shown.fields[name] = value }
                shown.version += 1
                isPending = true
            }
            while shown.version < Int32.max,
                let intent = intents.last(where: { !$0.floats && $0.base == shown.version })
            {
                show(intent)
            }
            for intent in intents where intent.floats && shown.version < Int32.max { show(intent) }
            return (shown, isPending)
        }

        /// What lists show for the id; `nil` while nothing is known.
        var member: ListMember? {
            if let shown { return .profile(shown.profile, isPending: shown.isPending) }
            return deletedAbove == nil ? nil : .missing
        }
    }

    let window: Duration
    let capacity: Int
    let now: @Sendable () -> ContinuousClock.Instant
    let observers: ProfileObservers
    let lists: ProfileListObservers
    /// The records, read from the store's file at their first use (``restoreIfNeeded()``).
    var records: [Int64: Record] {
        get {
            restoreIfNeeded()
            return storedRecords
        }
        _modify {
            restoreIfNeeded()
            yield &storedRecords
        }
    }
    private var storedRecords: [Int64: Record] = [:]
    /// The store's file until it is read, and the most bytes it may have.
    var unreadFile: (file: ProfileStoreFile, maximumBytes: Int)?
    var nextSequence: UInt64 = 0
    /// How many times the client was cleared: work begun before a ``clear(removing:)`` passes
    /// the generation it began in, and what it brings back is dropped.
    var generation: UInt64 = 0
    /// The last edit sequence number begun before the latest ``clear(removing:)``: the answers
    /// of those edits are not the store's any more.
    var clearedThrough: UInt64 = 0
    var useCounter: UInt64 = 0
    /// The serialized edits of each id (``ProfileClient/setDisplayName(_:id:)``).
    var lanes: [Int64: EditLane] = [:]
    /// Whether a profile changed since the store was last written to disk.
    var hasUnsavedChanges = false
    /// The store's size at which ``evictIfFull()`` looks again after a scan that left it above
    /// its target, and how many scans it made (for tests of the cost).
    var nextEvictionScanAt = 0
    var evictionScans = 0
    /// The ids the service answered in their owner's view (``PrivateAnswers``): kept out of the
    /// persisted store unless ``persistsPrivateProfiles``.
    var ownerViewIDs: Set<Int64> = []
    let persistsPrivateProfiles: Bool

    /// - Parameter file: the store's file, read at the first use of the store — on the actor,
    ///   never on the thread that made the client.
    init(
        window: Duration, capacity: Int, observers: ProfileObservers, lists: ProfileListObservers,
        now: @escaping @Sendable () -> ContinuousClock.Instant, file: ProfileStoreFile? = nil,
        persistsPrivateProfiles: Bool = false
    ) {
        self.persistsPrivateProfiles = persistsPrivateProfiles
        self.window = window
        self.capacity = max(1, capacity)
        self.observers = observers
        self.lists = lists
        self.now = now
        // About 300 bytes a profile: a file far above that for the capacity is not the store's.
        self.unreadFile = file.map { ($0, max(1, capacity) * 4_096) }
    }

    /// Reads the store's file once, if there is one not read yet: its profiles (most recently
    /// used first) are held as confirmed, each raising its id's floor, as if fetched — versions
    /// the service did commit — and are what a new observer of their ids starts with.
    func restoreIfNeeded() {
        guard let (file, maximumBytes) = unreadFile else { return }
        unreadFile = nil
        let restored = file.loadTagged(maximumBytes: maximumBytes)
        for (rank, (profile, tag)) in restored.prefix(capacity).enumerated() where storedRecords[profile.id] == nil {
            storedRecords[profile.id] = Record(
                confirmed: profile, confirmedTag: tag, floor: profile.version, lastUse: UInt64(restored.count - rank))
            observers.publish(.updated(profile), for: profile.id)
        }
        useCounter = UInt64(restored.count)
    }

    /// The profile this client wrote for `id` while its window lasts and nothing newer is known.
    func writtenProfile(id: Int64) -> Profile? {
        guard let written = records[id]?.written else { return nil }
        guard written.expires > now() else {
            records[id]?.written = nil
            return nil
        }
        touch(id)
        return written.profile
    }

    /// The newest confirmed profile of `id`, if any.
    func confirmedProfile(id: Int64) -> Profile? {
        records[id]?.confirmed
    }

    /// The newest confirmed profile of `id` and the tag that revalidates it: the one the service
    /// sent with it, else its version's (`"7"`, as the service tagged every profile before some
    /// fields were owner-only).
    func revalidation(id: Int64) -> (profile: Profile, tag: String)? {
        guard let record = records[id], let confirmed = record.confirmed else { return nil }
        return (confirmed, record.confirmedTag ?? "\"\(confirmed.version)\"")
    }

    /// What the store holds of `id` for a read that may be answered from it: a profile this client
    /// wrote within the window, else the last one the service confirmed.
    func heldProfile(id: Int64) -> Profile? {
        if let written = writtenProfile(id: id) { return written }
        guard let confirmed = records[id]?.confirmed else { return nil }
        touch(id)
        return confirmed
    }

    /// The version the next read of `id` must not go below, if the client knows one.
    func floor(id: Int64) -> Int32? {
        guard let floor = records[id]?.floor, floor > 0 else { return nil }
        return floor
    }

    /// The floor of each of `ids` the client knows one of: a multi-id stream resumes above it.
    func floors(for ids: [Int64]) -> [Int64: Int32] {
        var floors: [Int64: Int32] = [:]
        for id in ids { floors[id] = floor(id: id) }
        return floors
    }

    /// The ids of `ids` nothing is known of: no profile and no deletion.
    func unknownIDs(among ids: [Int64]) -> [Int64] {
        ids.filter { records[$0]?.member == nil }
    }

    /// Gives the observed lists what is known of `ids` now (a list that was just registered).
    func publishMembers(of ids: [Int64]) {
        var members: [Int64: ListMember] = [:]
        for id in ids { members[id] = records[id]?.member }
        lists.update(members)
    }

    /// A profile the service returned to a read, or in a 409: never hidden by an older local entry.
    /// Like every change below that the service brought, dropped when the client was cleared
    /// since `generation`, the one the request began in.
    /// - Returns: the newer of `profile` and the confirmed profile of its id: what the read returns.
    /// - Parameter tag: the answer's `ETag`, if it had one.
    @discardableResult
    func didFetch(_ profile: Profile, tag: String? = nil, since generation: UInt64) -> Profile {
        guard generation == self.generation else { return profile }
        confirm(profile, tag: tag)
        publish([profile.id])
        return records[profile.id]?.confirmed ?? profile
    }

    /// The service said `id` does not exist (a 404 to a read or a stream, a `deleted` event).
    func didLearnMissing(id: Int64, since generation: UInt64) {
        guard generation == self.generation else { return }
        apply(.deleted(id: id))
        publish([id])
    }

    /// A version the event stream announced (committed somewhere): shown like a fetch.
    func didReceiveEvent(_ profile: Profile, since generation: UInt64) {
        guard generation == self.generation else { return }
        apply(.profile(profile))
        publish([profile.id])
    }

    /// Events of a multi-id stream that arrived together: applied in one step, so each observed
    /// list holding them changes once.
    func didReceiveEvents(_ events: [ProfileStreamEvent], since generation: UInt64) {
        guard generation == self.generation else { return }
        for event in events { apply(event) }
        publish(events.map(\.id))
    }

    /// A profile the service returned to this client's write: answers reads for the window.
    /// - Returns: the newer of `profile` and the confirmed profile of its id.
    @discardableResult
    func didWrite(_ profile: Profile, since generation: UInt64) -> Profile {
        guard generation == self.generation else { return profile }
        record(written: profile)
        publish([profile.id])
        return records[profile.id]?.confirmed ?? profile
    }

    /// Starts an optimistic update made over version `base` and shows it to observers at once
    /// (while `base` is the newest confirmed version), marked pending. With `base` `nil`, a
    /// patch (`floats`) is shown over whichever version is confirmed, any other edit over the
    /// first version confirmed.
    /// - Returns: the intent's sequence number, for ``finishUpdate(id:sequence:outcome:)``.
    func beginUpdate(
        id: Int64, displayName: String?, username: String? = nil, fields: [String: String?] = [:], base: Int32?,
        floats: Bool = false
    ) -> UInt64 {
        nextSequence += 1
        let base = floats ? records[id]?.confirmed?.version : base
        records[id, default: Record()].intents.append(
            Intent(
                sequence: nextSequence, displayName: displayName, username: username, fields: fields, base: base,
                floats: floats))
        publish([id])
        return nextSequence
    }

    enum UpdateOutcome {
        case written(Profile)
        case conflict(current: Profile)
        case failed
    }

    /// Ends intents: the answer to the one numbered `sequence` supersedes it and every older one
    /// of the id (the latest intent wins) — except older patches without a version, which the
    /// service applies on their own: each stays shown until its answer. A failure drops the
    /// intents through `sequence` (the same patches excepted), so observers get the newest
    /// confirmed profile back unless a later intent shows. The outcome of an update begun
    /// before a ``clear(removing:)`` is dropped.
    ///
    /// - Returns: the newer of the answer and the confirmed profile, for a written or 409 answer.
    @discardableResult
    func finishUpdate(id: Int64, sequence: UInt64, outcome: UpdateOutcome) -> Profile? {
        guard sequence > clearedThrough else { return nil }
        records[id]?.intents.removeAll { $0.sequence == sequence || ($0.sequence < sequence && !$0.floats) }
        switch outcome {
        case .written(let profile): record(written: profile)
        case .conflict(let current): confirm(current)
        case .failed: break
        }
        publish([id])
        return records[id]?.confirmed
    }

    // MARK: Private

    private func apply(_ event: ProfileStreamEvent) {
        switch event {
        case .profile(let profile):
            confirm(profile)
        case .deleted(let id):
            var record = records[id, default: Record()]
            if record.confirmed != nil { hasUnsavedChanges = true }
            record.deletedAbove = record.floor
            record.confirmed = nil
            record.written = nil
            records[id] = record
        }
    }

    /// - Parameter tag: the service's entity tag of `profile`, if it sent one; the same profile
    ///   without one keeps the tag held.
    private func confirm(_ profile: Profile, tag: String? = nil) {
        var record = records[profile.id, default: Record()]
        if let deletedAbove = record.deletedAbove {
            guard profile.version > deletedAbove else { return }  // older than the deletion
            record.deletedAbove = nil
        }
        if record.confirmed == nil {
            // The first version known: the edits made without one stand over it.
            for (index, intent) in record.intents.enumerated() where intent.base == nil && !intent.floats {
                record.intents[index].base = profile.version
            }
            if lanes[profile.id] != nil, lanes[profile.id]?.sendingBase == nil {
                lanes[profile.id]?.sendingBase = profile.version
            }
        }
        if record.confirmed.map({ $0.version <= profile.version }) ?? true {
            let tag = tag ?? (record.confirmed == profile ? record.confirmedTag : nil)
            if record.confirmed != profile || record.confirmedTag != tag { hasUnsavedChanges = true }
            record.confirmed = profile
            record.confirmedTag = tag
        }
        // A patch a newer confirmed version already holds is shown by it, not over it.
        for index in record.intents.indices where record.intents[index].floats {
            let intent = record.intents[index]
            if intent.base.map({ profile.version > $0 }) ?? true, intent.isHeld(by: profile) {
                record.intents[index].floats = false
                record.intents[index].base = profile.version - 1
            }
        }
        record.floor = max(record.floor, profile.version)
        if let written = record.written, written.profile.version < profile.version {
            record.written = nil
        }
        records[profile.id] = record
    }

    private func record(written profile: Profile) {
        confirm(profile)
        if records[profile.id]?.confirmed?.version == profile.version {
            records[profile.id]?.written = (profile, now() + window)
        }
    }

    func touch(_ id: Int64) {
        useCounter += 1
        records[id]?.lastUse = useCounter
    }

    /// Publishes what is shown for `ids` now: to each id's observers, and to the lists in one step.
    func publish(_ ids: [Int64]) {
        var members: [Int64: ListMember] = [:]
        for id in ids {
            touch(id)
            guard let record = records[id] else { continue }
            if let shown = record.shown {
                observers.publish(shown.isPending ? .pending(shown.profile) : .updated(shown.profile), for: id)
            } else if record.deletedAbove != nil {
                observers.publish(.deleted(id: id), for: id)
            }
            members[id] = record.member
        }
        lists.update(members)
        evictIfFull()
    }
}
