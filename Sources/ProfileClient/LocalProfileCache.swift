import Foundation

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
    /// An edit not answered yet: queued, or being sent (``LocalProfileCache+Edits.swift``).
    struct Intent {
        var sequence: UInt64
        var changes: ProfileChanges
        /// The version the edit is made over and is sent with (`If-Match`): the caller's
        /// `expectedVersion`; else the version the user saw — the confirmed one, or the one an
        /// edit of this client before it will write, while that one is shown pending. `nil` while
        /// no version of the id is known: the first one known then stands for it.
        var base: Int32?
        /// The caller named the version: the edit is never moved over another.
        var isExact: Bool
        /// What the user saw of each member the edit sets, in the version it was made over: a
        /// change made elsewhere to one of them since is a conflict; a change to any other member
        /// is not, and the edit moves over it.
        var seen: [String: String?] = [:]
        /// The edit of this client whose pending version this one was made over (that edit's
        /// number), if it was: it then follows that edit's fate — over the version it writes, or,
        /// refused, over what it stood on.
        var madeOver: UInt64? = nil
        /// It is the edit being sent now.
        var isSending = false

        /// Whether the edit goes over `profile`, a version above its base, without overwriting
        /// a change the user has not seen: every member it sets is as the user saw it.
        func fits(over profile: Profile) -> Bool {
            seen.allSatisfy { name, value in profile.member(name) == value }
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

        /// Whether the service has not confirmed ``confirmed`` since the client started: it was
        /// restored from the persisted store.
        var isFromStore = false
        /// When the service last confirmed ``confirmed``, by the device's clock.
        var confirmedAt: Date?

        /// What is shown: from the confirmed profile, each edit in the order made, as the version
        /// it would become (pending) — an edit made over the version shown so far, or, unless the
        /// caller named its version, one made over an older version whose members the versions
        /// since left as the user saw them (the service will take it over them). An edit the
        /// confirmed version already holds (its own event arrived first) is shown by it, and
        /// one that would overwrite a change the user has not seen is not shown. So a newer
        /// confirmed version — another device's change, or an edit's own event arriving before
        /// its answer — is shown at once, and no version is shown that the service could not
        /// write next.
        /// `top` is the number of the last edit shown.
        var shown: (profile: Profile, isPending: Bool, top: UInt64?)? {
            guard var shown = confirmed else { return nil }
            var isPending = false
            var top: UInt64?
            for intent in intents where shown.version < Int32.max {
                guard let base = intent.base else { continue }
                let goesOver =
                    base == shown.version
                    || (!intent.isExact && base < shown.version && !intent.changes.isHeld(by: shown)
                        && intent.fits(over: shown))
                guard goesOver else { continue }
                shown = intent.changes.applied(to: shown)
                shown.version += 1
                isPending = true
                top = intent.sequence
            }
            return (shown, isPending, top)
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
    /// The ids of the edits not answered yet, in the order made (one entry per edit): the order
    /// they are sent in. Each edit is an ``Intent`` of its id's record.
    var outbox: [(id: Int64, sequence: UInt64)] = []
    /// The callers waiting for each edit's answer, by edit sequence number, then by caller.
    var editCallers: [UInt64: [UInt64: CheckedContinuation<Result<Profile, ProfileClientError>, Never>]] = [:]
    /// Whether the client's edit sender runs; ``edits`` starts it when an edit is queued.
    var isSendingEdits = false
    let edits: EditSenderStart
    /// The outcomes of edits no caller was waiting for, until someone asks (``editOutcomes()``).
    let outcomes: EditOutcomes
    /// What ``ObservableProfiles`` reads beside each id's events.
    let metadata: StoreMetadata
    /// The ids whose restored profile the service confirmed since their last publication: their
    /// state is published again even if equal, so entries stop saying they are from the store.
    var confirmedSinceRestore: Set<Int64> = []
    let wallClock: @Sendable () -> Date
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
        persistsPrivateProfiles: Bool = false, edits: EditSenderStart = EditSenderStart(),
        outcomes: EditOutcomes = EditOutcomes(), metadata: StoreMetadata = StoreMetadata(),
        wallClock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.edits = edits
        self.outcomes = outcomes
        self.metadata = metadata
        self.wallClock = wallClock
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
    /// the service did commit — and are what a new observer of their ids starts with. Its edits
    /// not answered yet are queued again, shown pending, and sent.
    func restoreIfNeeded() {
        guard let (file, maximumBytes) = unreadFile else { return }
        unreadFile = nil
        let restored = file.loadStore(maximumBytes: maximumBytes)
        for (rank, held) in restored.profiles.prefix(capacity).enumerated() where storedRecords[held.profile.id] == nil {
            storedRecords[held.profile.id] = Record(
                confirmed: held.profile, confirmedTag: held.tag, floor: held.profile.version,
                lastUse: UInt64(restored.profiles.count - rank), isFromStore: true, confirmedAt: held.confirmedAt)
        }
        useCounter = UInt64(restored.profiles.count)
        var sequences: [UInt64] = []
        for edit in restored.edits {
            nextSequence += 1
            let madeOver = edit.over.flatMap { $0 >= 0 && $0 < sequences.count ? sequences[$0] : nil }
            storedRecords[edit.id, default: Record()].intents.append(
                Intent(
                    sequence: nextSequence, changes: edit.changes, base: edit.base, isExact: edit.isExact, seen: edit.seen,
                    madeOver: madeOver))
            outbox.append((edit.id, nextSequence))
            sequences.append(nextSequence)
        }
        for id in Set(restored.profiles.prefix(capacity).map(\.profile.id) + restored.edits.map(\.id)) {
            guard let record = storedRecords[id] else { continue }
            metadata.set(StoreMetadata.Item(record), for: id)
            if let shown = record.shown {
                observers.publish(shown.isPending ? .pending(shown.profile) : .updated(shown.profile), for: id)
            }
        }
        if !outbox.isEmpty { startSendingEdits() }
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

    // MARK: Private

    func apply(_ event: ProfileStreamEvent) {
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
    func confirm(_ profile: Profile, tag: String? = nil) {
        var record = records[profile.id, default: Record()]
        if let deletedAbove = record.deletedAbove {
            guard profile.version > deletedAbove else { return }  // older than the deletion
            record.deletedAbove = nil
        }
        if record.confirmed == nil {
            // The first version known: the edits made without one stand over it, as the user sees it.
            for index in record.intents.indices where record.intents[index].base == nil {
                record.intents[index].base = profile.version
                for name in record.intents[index].changes.members.keys where record.intents[index].seen[name] == nil {
                    record.intents[index].seen[name] = .some(profile.member(name))
                }
                hasUnsavedChanges = true
            }
        }
        if record.confirmed.map({ $0.version <= profile.version }) ?? true {
            let tag = tag ?? (record.confirmed == profile ? record.confirmedTag : nil)
            if record.confirmed != profile || record.confirmedTag != tag { hasUnsavedChanges = true }
            record.confirmed = profile
            record.confirmedTag = tag
            if record.isFromStore { confirmedSinceRestore.insert(profile.id) }
            record.isFromStore = false
            let now = wallClock()
            // The file's date may lag by an hour: a revalidation that changes nothing else
            // rewrites the file at most that often.
            if record.confirmedAt.map({ now.timeIntervalSince($0) > 3_600 }) ?? true { hasUnsavedChanges = true }
            record.confirmedAt = now
        }
        record.floor = max(record.floor, profile.version)
        if let written = record.written, written.profile.version < profile.version {
            record.written = nil
        }
        records[profile.id] = record
    }

    func record(written profile: Profile) {
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
            metadata.set(StoreMetadata.Item(record), for: id)
            let again = confirmedSinceRestore.remove(id) != nil
            if let shown = record.shown {
                observers.publish(shown.isPending ? .pending(shown.profile) : .updated(shown.profile), for: id, again: again)
            } else if record.deletedAbove != nil {
                observers.publish(.deleted(id: id), for: id)
            }
            members[id] = record.member
        }
        lists.update(members)
        evictIfFull()
    }
}
