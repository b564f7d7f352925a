/// The live updates of every id ``ObservableProfiles`` follows, over multi-id event streams
/// (`/users/profiles/events`): one connection per up to 1,000 ids, not one per id, so a screen of
/// hundreds of rows stays far within the service's streams per user (32 by default).
///
/// When the set of ids changes — rows scroll in and out — the streams are replaced once the
/// changes of one moment have settled (``settleDelay``): the old ones are closed before the new
/// ones open, so there are never more streams than groups, and each new stream resumes every id
/// at its floor (`id@version`), so nothing committed in between is missed. A stream's failure and
/// recovery reach every id it follows as ``ProfileEvent/failed(_:willRetry:)`` and
/// ``ProfileEvent/resumed``.
@MainActor
final class GroupedFollowing {
    /// How long the changes of one moment (a scroll) may gather before the streams are replaced.
    static let settleDelay: Duration = .milliseconds(20)

    private let following: StreamFollowing
    private let observers: ProfileObservers
    /// How many follows of each id run.
    private var counts: [Int64: Int] = [:]
    /// The ids followed, in the order they were first followed.
    private var order: [Int64] = []
    /// The ids the running streams follow, and the task that runs them.
    private var followed: [Int64] = []
    /// In a lock of its own so that `deinit`, which runs on no actor, can cancel it.
    private let running = LockedValue<Task<Void, Never>?>(nil)
    private var scheduled: Task<Void, Never>?
    private var isReplacing = false

    init(following: StreamFollowing, observers: ProfileObservers) {
        self.following = following
        self.observers = observers
    }

    deinit {
        running.withLock { $0?.cancel() }
    }

    func add(_ id: Int64) {
        counts[id, default: 0] += 1
        guard counts[id] == 1 else { return }
        order.append(id)
        schedule()
    }

    func remove(_ id: Int64) {
        guard let count = counts[id] else { return }
        guard count == 1 else {
            counts[id] = count - 1
            return
        }
        counts[id] = nil
        order.removeAll { $0 == id }
        schedule()
    }

    private func schedule() {
        guard scheduled == nil else { return }
        scheduled = Task { [weak self] in
            try? await Task.sleep(for: Self.settleDelay)
            await self?.replaceStreams()
        }
    }

    /// Replaces the running streams with streams of the ids followed now, unless they are the same.
    private func replaceStreams() async {
        scheduled = nil
        guard !isReplacing else { return }  // the replacement under way schedules another
        isReplacing = true
        defer { isReplacing = false }
        while order != followed {
            let ids = order
            if let previous = running.withLock({ running in defer { running = nil }; return running }) {
                previous.cancel()
                await previous.value  // closed before the next opens
            }
            followed = ids
            guard !ids.isEmpty else { continue }
            let (following, observers) = (following, observers)
            let streams = Task {
                await withTaskGroup(of: Void.self) { group in
                    for chunk in ProfileClient.streamChunks(ids) {
                        group.addTask {
                            let refusal = await following.followList(ids: chunk) { event in
                                for id in chunk { observers.publish(event, for: id) }
                            }
                            guard let refusal else { return }
                            let error = ProfileClient.error(for: refusal)
                            for id in chunk { observers.publish(.failed(error, willRetry: false), for: id) }
                        }
                    }
                }
            }
            running.withLock { $0 = streams }
        }
    }
}
