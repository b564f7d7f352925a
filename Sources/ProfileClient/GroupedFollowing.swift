/// The live updates of every id ``ObservableProfiles`` follows, over multi-id event streams
/// (`/users/profiles/events`): one connection per up to 1,000 ids, not one per id, so a screen of
/// hundreds of rows stays far within the service's streams per user (32 by default).
///
/// When the set of ids changes — rows scroll in and out — the streams are replaced once the
/// changes of one moment have settled (``settleDelay``): the old ones are closed before the new
/// ones open, so there are never more streams than groups, and each new stream resumes every id
/// at its floor (`id@version`), so nothing committed in between is missed. A stream's failure and
/// recovery reach every id it follows as ``ProfileEvent/failed(_:willRetry:)`` and
/// ``ProfileEvent/resumed``. The streams are one of the client's live subscriptions, so
/// ``ProfileClient/pauseLiveUpdates()`` closes them and ``ProfileClient/resumeLiveUpdates()``
/// reopens them.
@MainActor
final class GroupedFollowing {
    /// How long the changes of one moment (a scroll) may gather before the streams are replaced.
    static let settleDelay: Duration = .milliseconds(20)

    private let following: StreamFollowing
    private let observers: ProfileObservers
    private let subscriptions: LiveSubscriptions
    /// How many follows of each id run.
    private var counts: [Int64: Int] = [:]
    /// The ids followed, in the order they were first followed.
    private var order: [Int64] = []
    /// The ids the running streams follow.
    private var followed: [Int64] = []
    /// The live subscription of the streams running now, if any. In a lock of its own so that
    /// `deinit`, which runs on no actor, can release it.
    private let current = LockedValue<LiveSubscription?>(nil)
    private var scheduled: Task<Void, Never>?
    private var isReplacing = false
    /// Generations are numbered across the client's stores, whose subscriptions share a table.
    private nonisolated static let generations = LockedValue<UInt64>(0)

    init(following: StreamFollowing, observers: ProfileObservers, subscriptions: LiveSubscriptions) {
        self.following = following
        self.observers = observers
        self.subscriptions = subscriptions
    }

    deinit {
        if let subscription = current.withLock({ $0 }) { subscriptions.release(subscription) }
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
            if let previous = current.withLock({ current in defer { current = nil }; return current }) {
                await subscriptions.release(previous)?.value  // closed before the next opens
            }
            followed = ids
            guard !ids.isEmpty else { continue }
            let subscription = LiveSubscription.grouped(Self.generations.withLock { $0 += 1; return $0 })
            current.withLock { $0 = subscription }
            let (following, observers) = (following, observers)
            subscriptions.retain(subscription) {
                Task { await Self.follow(ids, with: following, reportingTo: observers) }
            }
        }
    }

    /// Follows `ids` over as many streams as they need, until cancelled; each stream's failures,
    /// recoveries and refusal for good go to the observers of every id it follows.
    private nonisolated static func follow(
        _ ids: [Int64], with following: StreamFollowing, reportingTo observers: ProfileObservers
    ) async {
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
}
