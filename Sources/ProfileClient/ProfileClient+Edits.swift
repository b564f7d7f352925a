extension ProfileClient {
    /// Edits profile `id`: sets what `changes` gives (display name, username, fields; a `nil`
    /// field unsets it) and leaves every other member as it is. What an app calls for every edit,
    /// however fast the user makes them.
    ///
    /// ```swift
    /// let renamed = try await client.edit(id: 42, ProfileChanges(displayName: "Ada"))
    /// ```
    ///
    /// Observers of `id` see the edit at once, as ``ProfileEvent/pending(_:)``. The client sends
    /// edits one at a time, in the order made, each once: an edit made while the last one queued
    /// of the same id waits joins it (one request, the later value of a member winning, every
    /// caller getting its answer), and each is sent over the version the edit before it wrote —
    /// so the client's own edits never conflict with each other and the last one wins.
    ///
    /// Without `expectedVersion` the edit is made over the version the user sees: a change made
    /// elsewhere since then to a member it sets is a ``ProfileClientError/conflict(current:)``
    /// (the service's profile is shown), never silently overwritten; a change to other members
    /// is kept, and the edit is applied over it. With `expectedVersion` the edit applies only to
    /// that version (as the version of a pending profile shown, it is the version that pending
    /// edit writes): any other is a conflict. A conflict also fails the edits made over the
    /// refused one that set a member the conflict changed. Any other refusal rolls back only the
    /// edit refused; those made over it are still sent.
    ///
    /// Offline — no answer at all: no connection, none in time — the edit is kept, not rolled
    /// back: it stays shown pending, is written with the store when ``ProfileClientConfiguration/persistenceFile``
    /// is set, and is sent when the network is back (``networkDidReturn()``, ``resumeLiveUpdates()``,
    /// or any request or stream of the client answered; after a launch, once the store is first
    /// used). This call returns when the service answered the edit, however long that takes.
    /// Cancelling the caller does not cancel the edit: the caller gets
    /// ``ProfileClientError/cancelled`` at once, and the edit's outcome goes to ``editOutcomes()``.
    /// When the client knows no version of the profile it reads it first.
    /// - Returns: the profile the service stored.
    /// - Throws: ``ProfileClientError``: `conflict(current:)`, `usernameTaken`, `notFound`,
    ///   `validation` (a field the service does not declare, a malformed username…), `cancelled`…;
    ///   never an error of the network.
    public func edit(id: Int64, _ changes: ProfileChanges, expectedVersion: Int32? = nil)
        async throws(ProfileClientError) -> Profile
    {
        let caller = Self.callers.withLock { count in
            count += 1
            return count
        }
        let result = await withTaskCancellationHandler { [cache] in
            await cache.edit(id: id, changes: changes, expectedVersion: expectedVersion, caller: caller)
        } onCancel: { [cache] in
            Task { await cache.dropCaller(caller) }
        }
        return try result.get()
    }

    /// The outcome of every edit no caller waits for when the service answers it: an edit made
    /// before the app last quit and sent after it started again, or one whose caller was
    /// cancelled. A conflict (``ProfileClientError/conflict(current:)``: someone changed what the
    /// edit sets since the version the user saw) is one to tell the user of. While no stream is
    /// open the newest 64 outcomes are kept for the next one; open one at launch.
    public func editOutcomes() -> AsyncStream<ProfileEditOutcome> {
        let stream = cache.outcomes.stream()
        restoreStore()
        return stream
    }

    /// Whether any edit of this client waits to be sent or answered (offline, it waits for the
    /// network).
    public var hasPendingEdits: Bool {
        get async { await cache.hasPendingEdits }
    }

    /// What the client holds of `id` now — the profile shown, whether an edit of it is pending,
    /// whether it came from the persisted store and when the service last confirmed it — without
    /// a request; `nil` when it holds nothing.
    public func entry(id: Int64) async -> Entry? {
        await cache.entry(id: id)
    }

    /// Numbers the callers of ``edit(id:_:expectedVersion:)``, for cancellation.
    private static let callers = LockedValue<UInt64>(0)

    /// What one turn of the sender did.
    enum EditStep {
        /// No edit waits: the sender stops.
        case idle
        /// The service answered an edit.
        case answered
        /// The edit got no answer: it waits for the network.
        case noAnswer
    }

    /// Sends the queued edits one at a time until none is left. After an edit got no answer it
    /// sleeps with backoff (``ProfileClientConfiguration/liveUpdates``), until the network is
    /// back (``NetworkWakeUps``), or until the next edit is made. Holds the client only while it
    /// sends.
    func startEditSender() {
        Task { [weak self, networkWakeUps, sleep, randomUnit, policy = configuration.liveUpdates, edits = cache.edits] in
            var failures = 0
            while let step = await self?.sendNextEdit() {
                switch step {
                case .idle: return
                case .answered: failures = 0
                case .noAnswer:
                    failures += 1
                    let delay = policy.delay(afterFailures: failures, serverDelay: nil, randomUnit: randomUnit())
                    await withTaskGroup(of: Void.self) { group in
                        group.addTask { _ = await networkWakeUps.sleep(delay, using: sleep) }
                        group.addTask { await edits.untilNudged() }
                        await group.next()
                        group.cancelAll()
                    }
                    if Task.isCancelled { return }
                }
            }
        }
    }

    /// Sends the oldest queued edit: `PATCH` with `If-Match` of the version it stands over. A 409
    /// whose profile already holds the edit (an earlier attempt landed, its answer lost) is its
    /// success; one whose change leaves what the edit sets as the user saw it moves the edit over
    /// it and sends it again (three times at most).
    func sendNextEdit() async -> EditStep {
        guard var edit = await cache.nextEdit() else { return .idle }
        let generation = await cache.generation
        do throws(ProfileClientError) {
            if edit.base == nil {
                _ = try await fetch(id: edit.id, policy: .reloadFromServer)
                // The version read stands for the one the edit was made over.
                guard let read = await cache.nextEdit(), read.sequence == edit.sequence, read.base != nil else {
                    return .answered
                }
                edit = read
            }
            var moves = 0
            while true {
                do throws(ProfileClientError) {
                    let profile = try await patch(edit.changes, id: edit.id, expectedVersion: edit.base!)
                    await cache.finishEdit(edit, result: .success(profile))
                    return .answered
                } catch .conflict(let current) where edit.landed(in: current) {
                    await cache.finishEdit(edit, result: .success(current))
                    return .answered
                } catch .conflict(let current) where moves < 3 && edit.fits(over: current) {
                    moves += 1
                    edit.base = current.version
                    await cache.move(edit, over: current, since: generation)
                }
            }
        } catch where error.isNoAnswer {
            await cache.keep(edit, over: edit.base)
            return .noAnswer
        } catch {
            await cache.finishEdit(edit, result: .failure(error))
            return .answered
        }
    }

    /// `PATCH /users/profile/{id}` (JSON Merge Patch) of `changes` at `expectedVersion`; the
    /// answer is not yet in the store.
    private func patch(_ changes: ProfileChanges, id: Int64, expectedVersion: Int32) async throws(ProfileClientError)
        -> Profile
    {
        let body = try Self.encode(patch: changes.members)
        let headers = ["Content-Type": "application/merge-patch+json", "If-Match": "\"\(expectedVersion)\""]
        let response = try await send(method: "PATCH", path: "/users/profile/\(id)", body: body, isRead: false, headers: headers)
        guard response.status == 200 else { throw Self.error(for: response) }
        return try Self.decodeProfile(response.body)
    }
}
