/// The serialized edits of one id (``ProfileClient/setDisplayName(_:id:)``): one request in
/// flight, and the newest edit waiting for it. An edit made while another waits replaces it; the
/// replaced caller gets the answer of the edit that carried its intent forward.
struct EditLane {
    struct Waiting {
        var sequence: UInt64
        /// The version the edit was made over: the one the edit in flight will write, when it was
        /// shown pending; else the confirmed version the user saw.
        var base: Int32?
        /// Whether ``base`` is a confirmed version the user saw (not a pending one).
        var madeOverConfirmed: Bool
        var turn: CheckedContinuation<EditTurn, Never>
        /// Callers of the edits this one replaced.
        var followers: [CheckedContinuation<EditTurn, Never>]
    }

    /// The version the edit in flight expects (`nil` until it is known).
    var sendingBase: Int32?
    /// Callers whose edits the one in flight replaced: they get its answer.
    var followersOfSending: [CheckedContinuation<EditTurn, Never>] = []
    var next: Waiting?
}

/// What an edit's caller does when its turn comes.
enum EditTurn: Sendable {
    /// Send the edit now, expecting `expectedVersion` (`nil`: no version is known; read it first).
    case send(expectedVersion: Int32?)
    /// A later edit carried this one's intent: its answer.
    case done(Result<Profile, ProfileClientError>)
}

extension LocalProfileCache {
    /// Shows the edit at once, then waits for its turn: at once when no edit of `id` is in flight;
    /// else when the one in flight answered (a later edit made meanwhile takes this one's place).
    /// - Returns: the edit's sequence number, for ``finishEdit(id:sequence:result:)``, and its turn.
    func beginEdit(id: Int64, displayName: String) async -> (sequence: UInt64, turn: EditTurn) {
        let confirmed = records[id]?.confirmed?.version
        guard let lane = lanes[id] else {
            let sequence = beginUpdate(id: id, displayName: displayName, base: confirmed)
            lanes[id] = EditLane(sendingBase: confirmed)
            return (sequence, .send(expectedVersion: confirmed))
        }
        // Over the edit in flight while it is shown pending (it is over the confirmed version);
        // else over the confirmed version the user sees.
        var base = confirmed
        var overPending = false
        if let sending = lane.sendingBase, sending == confirmed, sending < Int32.max {
            (base, overPending) = (sending + 1, true)
        }
        let sequence = beginUpdate(id: id, displayName: displayName, base: base)
        let turn = await withCheckedContinuation { continuation in
            let replaced = lanes[id]?.next
            lanes[id]?.next = EditLane.Waiting(
                sequence: sequence, base: base, madeOverConfirmed: !overPending, turn: continuation,
                followers: replaced.map { $0.followers + [$0.turn] } ?? [])
        }
        return (sequence, turn)
    }

    /// Ends the edit in flight of `id`. A success is confirmed and the edit waiting (if any) goes
    /// next, expecting the version just written, so it never meets a 409 caused by this write.
    ///
    /// A 409 — someone else changed the profile — shows the service's profile; the edit waiting
    /// goes next only if it was made over that very version (the user saw it), else it fails
    /// too, as it would overwrite a change the user has not seen. Any other failure rolls back
    /// only the edit that failed: the edit waiting goes next, over the version the failed one
    /// was made on.
    /// An edit begun before a ``clear(removing:)`` changes nothing.
    /// - Returns: `result`, for the caller of the edit in flight.
    func finishEdit(id: Int64, sequence: UInt64, result: Result<Profile, ProfileClientError>)
        -> Result<Profile, ProfileClientError>
    {
        guard sequence > clearedThrough else { return result }  // begun before a clear: not the store's
        guard let lane = lanes.removeValue(forKey: id) else { return result }
        for follower in lane.followersOfSending { follower.resume(returning: .done(result)) }
        switch result {
        case .success(let profile):
            finishUpdate(id: id, sequence: sequence, outcome: .written(profile))
            if let next = lane.next { sendNext(next, id: id, expecting: max(next.base ?? 0, profile.version)) }
        case .failure(.conflict(let current)):
            guard let next = lane.next, next.madeOverConfirmed, next.base == current.version else {
                finishUpdate(id: id, sequence: lane.next?.sequence ?? sequence, outcome: .conflict(current: current))
                for waiting in (lane.next.map { $0.followers + [$0.turn] } ?? []) { waiting.resume(returning: .done(result)) }
                break
            }
            finishUpdate(id: id, sequence: sequence, outcome: .conflict(current: current))
            sendNext(next, id: id, expecting: current.version)
        case .failure:
            guard let next = lane.next else {
                finishUpdate(id: id, sequence: sequence, outcome: .failed)
                break
            }
            // The edit waiting stood over the failed one's version: it now stands over the
            // version that one was made on (before the rollback is shown, so it stays shown).
            var expected = next.base
            if let failedBase = lane.sendingBase, next.base == failedBase + 1 {
                expected = failedBase
                if var record = records[id] {
                    for index in record.intents.indices
                    where record.intents[index].sequence > sequence && record.intents[index].base == failedBase + 1 {
                        record.intents[index].base = failedBase
                    }
                    records[id] = record
                }
            }
            finishUpdate(id: id, sequence: sequence, outcome: .failed)
            sendNext(next, id: id, expecting: expected)
        }
        return result
    }

    /// Makes `next` the edit in flight, expecting `expected`.
    private func sendNext(_ next: EditLane.Waiting, id: Int64, expecting expected: Int32?) {
        lanes[id] = EditLane(sendingBase: expected, followersOfSending: next.followers)
        next.turn.resume(returning: .send(expectedVersion: expected))
    }
}
