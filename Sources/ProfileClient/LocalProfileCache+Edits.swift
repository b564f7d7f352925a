import Foundation

/// An edit as the sender sends it: a copy of its ``LocalProfileCache/Intent`` when its turn came.
struct EditToSend: Sendable {
    var id: Int64
    var sequence: UInt64
    var changes: ProfileChanges
    var base: Int32?
    var isExact: Bool
    var seen: [String: String?]

    /// Whether `current`, the service's profile in a 409, shows that the edit already landed —
    /// an attempt whose answer the network lost — so that sending it again would apply it twice.
    func landed(in current: Profile) -> Bool {
        guard let base, current.version > base, changes.isHeld(by: current) else { return false }
        return !isExact || current.version == base &+ 1
    }

    /// Whether the edit may go over `current` (a 409's): every member it sets is as the user saw
    /// it, or already the edit's value. Never an edit whose caller named the version.
    func fits(over current: Profile) -> Bool {
        !isExact && LocalProfileCache.Intent(sequence: sequence, changes: changes, base: base, isExact: false, seen: seen)
            .fits(over: current)
    }
}

/// Starts the client's edit sender (``ProfileClient/startEditSender()``), set once the client is
/// made, and wakes it while it sleeps after an edit got no answer: a new edit is a moment to try
/// again (the network may be back, with nothing else of the client answered yet).
final class EditSenderStart: Sendable {
    private let state = LockedValue<(start: (@Sendable () -> Void)?, requested: Bool)>((nil, false))
    /// The sender asleep, or whether a nudge came while none was (the next sleep then ends at once).
    private let sleeper = LockedValue<(continuation: AsyncStream<Void>.Continuation?, nudged: Bool, sleeps: UInt64)>(
        (nil, false, 0))

    /// Returns when ``nudge()`` is called (or was, since the last sleep), or when the task is cancelled.
    func untilNudged() async {
        let (nudged, continuation) = AsyncStream<Void>.makeStream()
        let sleep = sleeper.withLock { sleeper in
            sleeper.sleeps += 1
            if sleeper.nudged { continuation.finish() } else { sleeper.continuation = continuation }
            sleeper.nudged = false
            return sleeper.sleeps
        }
        for await _ in nudged {}
        sleeper.withLock { sleeper in
            if sleeper.sleeps == sleep { sleeper.continuation = nil }  // woken otherwise: no one sleeps now
        }
    }

    func nudge() {
        sleeper.withLock { sleeper in
            if let continuation = sleeper.continuation { continuation.finish() } else { sleeper.nudged = true }
            sleeper.continuation = nil
        }
    }

    func set(_ start: @escaping @Sendable () -> Void) {
        let requested = state.withLock { state in
            state.start = start
            defer { state.requested = false }
            return state.requested
        }
        if requested { start() }
    }

    func start() {
        let start = state.withLock { state in
            if state.start == nil { state.requested = true }
            return state.start
        }
        start?()
    }
}

/// The outcomes of edits that no caller waited for: given to every stream of
/// ``ProfileClient/editOutcomes()``; while there is none, kept (the newest 64) for the first one.
final class EditOutcomes: Sendable {
    private struct State {
        var streams: [UInt64: AsyncStream<ProfileEditOutcome>.Continuation] = [:]
        var next: UInt64 = 0
        var unclaimed: [ProfileEditOutcome] = []
    }

    private let state = LockedValue(State())

    func stream() -> AsyncStream<ProfileEditOutcome> {
        let (stream, continuation) = AsyncStream<ProfileEditOutcome>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let token = state.withLock { state in
            state.next += 1
            state.streams[state.next] = continuation
            for outcome in state.unclaimed { continuation.yield(outcome) }
            state.unclaimed = []
            return state.next
        }
        continuation.onTermination = { [weak self] _ in self?.state.withLock { _ = $0.streams.removeValue(forKey: token) } }
        return stream
    }

    func deliver(_ outcome: ProfileEditOutcome) {
        state.withLock { state in
            if state.streams.isEmpty {
                state.unclaimed = Array((state.unclaimed + [outcome]).suffix(64))
            } else {
                for continuation in state.streams.values { continuation.yield(outcome) }
            }
        }
    }

    func finishAll() {
        let streams = state.withLock { state in
            defer { state.streams = [:] }
            return Array(state.streams.values)
        }
        for stream in streams { stream.finish() }
    }
}

extension LocalProfileCache {
    /// Queues an edit of `id`, shows it at once, and waits for its answer.
    ///
    /// Without `expectedVersion` the edit is made over the version shown — a pending one, when an
    /// edit of this client before it is shown — with what the user sees of each member it sets;
    /// one made while the last edit queued (of the same id, not the next to be sent, without a
    /// version either) waits joins it: one request carries both, the later value of a member winning, and
    /// both callers get its answer.
    /// - Parameter caller: the caller's number, for ``dropCaller(_:)``.
    func edit(id: Int64, changes: ProfileChanges, expectedVersion: Int32?, caller: UInt64) async
        -> Result<Profile, ProfileClientError>
    {
        let shown = records[id]?.shown
        var seen: [String: String?] = [:]
        if let shown, expectedVersion == nil {
            for name in changes.members.keys { seen[name] = .some(shown.profile.member(name)) }
        }
        let madeOver = expectedVersion == nil || expectedVersion == shown?.profile.version ? shown?.top : nil
        let sequence: UInt64
        // The first edit queued is sent at once (or is being sent): never joined.
        if expectedVersion == nil, outbox.count > 1, let last = outbox.last, last.id == id,
            let index = records[id]?.intents.firstIndex(where: { $0.sequence == last.sequence }),
            let joined = records[id]?.intents[index], !joined.isSending, !joined.isExact
        {
            sequence = last.sequence
            records[id]?.intents[index].changes = joined.changes.merging(changes)
            records[id]?.intents[index].seen = seen.merging(joined.seen) { $1 }
        } else {
            nextSequence += 1
            sequence = nextSequence
            records[id, default: Record()].intents.append(
                Intent(
                    sequence: sequence, changes: changes, base: expectedVersion ?? shown?.profile.version,
                    isExact: expectedVersion != nil, seen: seen, madeOver: madeOver))
            outbox.append((id, sequence))
        }
        hasUnsavedChanges = true
        publish([id])
        startSendingEdits()
        return await withCheckedContinuation { continuation in
            if Task.isCancelled {
                continuation.resume(returning: .failure(.cancelled))
            } else {
                editCallers[sequence, default: [:]][caller] = continuation
            }
        }
    }

    /// The caller numbered `caller` went away (cancelled): it gets ``ProfileClientError/cancelled``
    /// now; its edit goes on, and its outcome goes to ``EditOutcomes`` unless another caller waits.
    func dropCaller(_ caller: UInt64) {
        for (sequence, callers) in editCallers {
            guard let continuation = callers[caller] else { continue }
            editCallers[sequence]?[caller] = nil
            continuation.resume(returning: .failure(.cancelled))
            return
        }
    }

    /// Starts the sender unless it runs; wakes it if it sleeps.
    func startSendingEdits() {
        guard !isSendingEdits else { return edits.nudge() }
        guard !outbox.isEmpty else { return }
        isSendingEdits = true
        edits.start()
    }

    /// The oldest edit not answered, marked as being sent; `nil` when there is none (the sender
    /// then stops, until the next edit starts it).
    func nextEdit() -> EditToSend? {
        guard let (id, sequence) = outbox.first,
            let index = records[id]?.intents.firstIndex(where: { $0.sequence == sequence }),
            let intent = records[id]?.intents[index]
        else {
            isSendingEdits = false
            return nil
        }
        records[id]?.intents[index].isSending = true
        return EditToSend(
            id: id, sequence: sequence, changes: intent.changes, base: intent.base, isExact: intent.isExact, seen: intent.seen)
    }

    /// A 409 showed that someone else changed the profile, but nothing the edit sets: the edit
    /// now stands over `current` (shown), and so do the edits made over it.
    func move(_ edit: EditToSend, over current: Profile, since generation: UInt64) {
        guard generation == self.generation, var record = records[edit.id],
            let index = record.intents.firstIndex(where: { $0.sequence == edit.sequence })
        else { return }
        record.intents[index].base = current.version
        record.intents[index].madeOver = nil
        Self.restack(&record, over: edit.sequence, at: current.version &+ 1)
        records[edit.id] = record
        hasUnsavedChanges = true
        confirm(current)
        publish([edit.id])
    }

    /// The edit got no answer (offline): it stays queued and shown, to be sent again over `base`.
    func keep(_ edit: EditToSend, over base: Int32?) {
        guard let index = records[edit.id]?.intents.firstIndex(where: { $0.sequence == edit.sequence }) else { return }
        records[edit.id]?.intents[index].base = base
    }

    /// Ends the edit numbered `sequence` with the service's answer, and gives `result` to its
    /// callers — or, when none waits any more, to ``EditOutcomes``.
    ///
    /// A success is confirmed, and the edits made over it stand over the version it wrote. A 409 —
    /// someone else changed what the edit sets — shows the service's profile; each edit made
    /// over the refused one stands over that profile if it fits over it (see
    /// ``Intent/fits(over:)``, with what the user saw under the refused one), else fails with the
    /// same error. Any other failure rolls back only the edit that failed: those made over it
    /// stand over the version it was made on. An edit begun before a ``clear(removing:)``
    /// changes nothing.
    func finishEdit(_ edit: EditToSend, result: Result<Profile, ProfileClientError>) {
        guard edit.sequence > clearedThrough else {
            answer(edit.sequence, id: edit.id, changes: edit.changes, with: result, toOutcomes: false)
            return
        }
        outbox.removeAll { $0.sequence == edit.sequence }
        var failed: [(Intent, Result<Profile, ProfileClientError>)] = []
        if var held = records[edit.id], let index = held.intents.firstIndex(where: { $0.sequence == edit.sequence }) {
            let intent = held.intents[index]
            switch result {
            case .success(let profile):
                Self.restack(&held, over: intent.sequence, at: profile.version)
                for later in held.intents.indices where held.intents[later].madeOver == intent.sequence {
                    held.intents[later].madeOver = nil  // over a confirmed version now
                }
                held.intents.remove(at: index)
                records[edit.id] = held
                record(written: profile)
            case .failure(.conflict(let current)):
                let dropped = Self.restand(&held, over: intent, at: current.version, madeOver: nil, judgedBy: current)
                let droppedSequences = Set(dropped.map(\.sequence))
                held.intents.removeAll { $0.sequence == intent.sequence || droppedSequences.contains($0.sequence) }
                records[edit.id] = held
                confirm(current)
                failed = dropped.map { ($0, result) }
            case .failure:
                _ = Self.restand(&held, over: intent, at: intent.base, madeOver: intent.madeOver, judgedBy: nil)
                held.intents.remove(at: index)
                records[edit.id] = held
            }
        }
        for (intent, result) in failed {
            outbox.removeAll { $0.sequence == intent.sequence }
            answer(intent.sequence, id: edit.id, changes: intent.changes, with: result, toOutcomes: true)
        }
        hasUnsavedChanges = true
        publish([edit.id])
        answer(edit.sequence, id: edit.id, changes: edit.changes, with: result, toOutcomes: true)
    }

    /// Whether any edit waits to be sent or answered.
    var hasPendingEdits: Bool { !outbox.isEmpty }

    /// What the client holds of `id`, as ``ProfileClient/entry(id:)`` gives it.
    func entry(id: Int64) -> ProfileClient.Entry? {
        guard let record = records[id], record.confirmed != nil || record.deletedAbove != nil || !record.intents.isEmpty
        else { return nil }
        let shown = record.shown
        return ProfileClient.Entry(
            profile: shown?.profile, isPending: shown?.isPending ?? false, hasPendingEdits: !record.intents.isEmpty,
            isDeleted: record.deletedAbove != nil && record.confirmed == nil, isFromStore: record.isFromStore,
            confirmedAt: record.confirmedAt)
    }

    // MARK: Private

    private func answer(
        _ sequence: UInt64, id: Int64, changes: ProfileChanges, with result: Result<Profile, ProfileClientError>,
        toOutcomes: Bool
    ) {
        let callers = editCallers.removeValue(forKey: sequence) ?? [:]
        if callers.isEmpty, toOutcomes {
            outcomes.deliver(ProfileEditOutcome(id: id, changes: changes, result: result))
        }
        for caller in callers.values { caller.resume(returning: result) }
    }

    /// Sets the edits made over the edit numbered `sequence` to stand over `version`, and those
    /// made over them over the versions that follow, down the chain. Edits whose caller named the
    /// version keep it.
    private static func restack(_ record: inout Record, over sequence: UInt64, at version: Int32) {
        for index in record.intents.indices where record.intents[index].madeOver == sequence {
            guard !record.intents[index].isExact else { continue }
            record.intents[index].base = version
            restack(&record, over: record.intents[index].sequence, at: version &+ 1)
        }
    }

    /// `failed` will not be written: the edits made over it stand over what it stood on —
    /// `version`, made over `madeOver` — with what the user saw under it. With `current` (a 409's
    /// profile), those that would overwrite a change in it the user has not seen, and those whose
    /// caller named the version, fail too, and so on down the chain: they are returned.
    private static func restand(
        _ record: inout Record, over failed: Intent, at version: Int32?, madeOver: UInt64?, judgedBy current: Profile?
    ) -> [Intent] {
        var dropped: [Intent] = []
        let setByFailed = failed.changes.members.keys
        for index in record.intents.indices where record.intents[index].madeOver == failed.sequence {
            var intent = record.intents[index]
            for name in setByFailed where intent.seen[name] != nil { intent.seen[name] = failed.seen[name] }
            if let current, intent.isExact || !intent.fits(over: current) {
                record.intents[index] = intent
                dropped.append(intent)
                dropped += restand(&record, over: intent, at: version, madeOver: madeOver, judgedBy: current)
                continue
            }
            intent.madeOver = madeOver
            if !intent.isExact { intent.base = version }
            record.intents[index] = intent
            if let version, !intent.isExact { restack(&record, over: intent.sequence, at: version &+ 1) }
        }
        return dropped
    }
}
