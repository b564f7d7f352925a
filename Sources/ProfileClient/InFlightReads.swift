/// Identical reads in flight, shared: a read made while the same one (same path and headers) is
/// on its way waits for that one's answer instead of sending its own, so ten views that appear
/// together and read one profile make one request.
///
/// The shared request is cancelled when every caller waiting for it was; a cancelled caller
/// among others still waiting gets the shared answer.
final class InFlightReads: Sendable {
    typealias Outcome = Result<TransportResponse, ProfileClientError>

    private struct Entry {
        var task: Task<Outcome, Never>
        var waiters: Int
    }

    private let entries = LockedValue<[String: Entry]>([:])

    /// The answer of the read named `key`: sent with `send` unless the same read is in flight.
    func answer(for key: String, send: @escaping @Sendable () async -> Outcome) async -> Outcome {
        let task = entries.withLock { entries in
            if let entry = entries[key] {
                entries[key]?.waiters += 1
                return entry.task
            }
            let task = Task { await send() }
            entries[key] = Entry(task: task, waiters: 1)
            return task
        }
        let outcome = await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            leave(key, task: task)
        }
        // The first caller back forgets the entry: a read made from now on is sent anew.
        entries.withLock { entries in
            if entries[key]?.task == task { entries[key] = nil }
        }
        return outcome
    }

    /// A caller of `key` was cancelled; the last one cancels the request.
    private func leave(_ key: String, task: Task<Outcome, Never>) {
        let cancel = entries.withLock { entries -> Bool in
            guard entries[key]?.task == task else { return false }
            entries[key]?.waiters -= 1
            return entries[key]?.waiters == 0
        }
        if cancel { task.cancel() }
    }
}
