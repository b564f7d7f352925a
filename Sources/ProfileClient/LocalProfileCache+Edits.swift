/// The serialized edits of one id (``ProfileClient/setDisplayName(_:id:)``): one request in
/// flight, and the newest edit waiting for it. An edit made while another waits replaces it; the
/// replaced caller gets the answer of the edit that carried its intent forward.
struct EditLane {
    struct Waiting {
        var sequence: UInt64
        /// The confirmed version when the edit was made: what the user saw.
        var base: Int32?
        var turn: CheckedContinuation<EditTurn, Never>
        /// Callers of the edits this one replaced.
        var followers: [CheckedContinuation<EditTurn, Never>]
    }

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
        let base = records[id]?.confirmed?.version
        let sequence = beginUpdate(id: id, displayName: displayName, expectedVersion: nil)
        guard lanes[id] != nil else {
            lanes[id] = EditLane()
            return (sequence, .send(expectedVersion: base))
        }
        let turn = await withCheckedContinuation { continuation in
            let replaced = lanes[id]?.next
            lanes[id]?.next = EditLane.Waiting(
                sequence: sequence, base: base, turn: continuation,
                followers: replaced.map { $0.followers + [$0.turn] } ?? [])
        }
        return (sequence, turn)
    }

    /// Ends the edit in flight of `id`. A success is confirmed and the edit waiting (if any) goes
    /// next, expecting the version just written, so it never meets a 409 caused by this write. A
    /// failure fails the waiting edits too and rolls back to the newest confirmed profile.
    /// - Returns: `result`, for the caller of the edit in flight.
    func finishEdit(id: Int64, sequence: UInt64, result: Result<Profile, ProfileClientError>)
        -> Result<Profile, ProfileClientError>
    {
        guard let lane = lanes.removeValue(forKey: id) else { return result }
        for follower in lane.followersOfSending { follower.resume(returning: .done(result)) }
        switch result {
        case .success(let profile):
            finishUpdate(id: id, sequence: sequence, outcome: .written(profile))
            if let next = lane.next {
                lanes[id] = EditLane(followersOfSending: next.followers)
                next.turn.resume(returning: .send(expectedVersion: max(next.base ?? 0, profile.version)))
            }
        case .failure(let error):
            let through = lane.next?.sequence ?? sequence
            if case .conflict(let current) = error {
                finishUpdate(id: id, sequence: through, outcome: .conflict(current: current))
            } else {
                finishUpdate(id: id, sequence: through, outcome: .failed)
            }
            if let next = lane.next {
                for waiting in next.followers + [next.turn] { waiting.resume(returning: .done(result)) }
            }
        }
        return result
    }
}
