/// What a client follows while anyone observes it: one list's streams, or one stream of the ids
/// observed one by one.
enum LiveSubscription: Hashable, Sendable {
    /// An ``ProfileClient/observeList(ids:)`` stream, by its token in ``ProfileListObservers``.
    case list(UInt64)
    /// One stream of ``FollowedStreams``, by its key in ``StreamLayout``.
    case followed(UInt64)
}

/// The subscriptions of one client and the task that follows each while anyone observes it,
/// and whether following is paused (``ProfileClient/pauseLiveUpdates()``).
final class LiveSubscriptions: Sendable {
    private struct Entry {
        var observers: Int
        /// Starts following; run again on resume.
        var start: @Sendable () -> Task<Void, Never>
        var task: Task<Void, Never>?
    }

    private struct State {
        var entries: [LiveSubscription: Entry] = [:]
        var paused = false
    }

    private let state = LockedValue(State())

    /// One more observer of `subscription`; the first starts following with `start` (unless
    /// paused), and so does the next one after following stopped by itself.
    func retain(_ subscription: LiveSubscription, start: @escaping @Sendable () -> Task<Void, Never>) {
        state.withLock { state in
            var entry = state.entries[subscription] ?? Entry(observers: 0, start: start)
            entry.observers += 1
            if entry.task == nil, !state.paused { entry.task = start() }
            state.entries[subscription] = entry
        }
    }

    /// Following ended by itself (refused for good): the next observer starts it again.
    func stopped(_ subscription: LiveSubscription) {
        state.withLock { $0.entries[subscription]?.task = nil }
    }

    /// One observer of `subscription` less; the last one stops following.
    /// - Returns: the task it cancelled, for a caller that waits until it has ended.
    @discardableResult
    func release(_ subscription: LiveSubscription) -> Task<Void, Never>? {
        let task = state.withLock { state -> Task<Void, Never>? in
            guard var entry = state.entries[subscription] else { return nil }
            entry.observers -= 1
            if entry.observers > 0 {
                state.entries[subscription] = entry
                return nil
            }
            state.entries[subscription] = nil
            return entry.task
        }
        task?.cancel()
        return task
    }

    /// Stops every task; subscriptions stay for ``resume()``.
    func pause() {
        let tasks = state.withLock { state in
            state.paused = true
            defer { for key in state.entries.keys { state.entries[key]?.task = nil } }
            return state.entries.values.compactMap(\.task)
        }
        for task in tasks { task.cancel() }
    }

    /// Starts following every subscription still observed.
    func resume() {
        state.withLock { state in
            state.paused = false
            for (key, entry) in state.entries where entry.task == nil {
                state.entries[key]?.task = entry.start()
            }
        }
    }

    /// Stops every task and starts it again (unless paused): each attempt from now on asks for
    /// the token and the resume point anew (``ProfileClient/clear()``).
    func restart() {
        let tasks = state.withLock { state in
            let tasks = state.entries.values.compactMap(\.task)
            if !state.paused {
                for (key, entry) in state.entries where entry.task != nil { state.entries[key]?.task = entry.start() }
            }
            return tasks
        }
        for task in tasks { task.cancel() }
    }

    func cancelAll() {
        let tasks = state.withLock { state in
            defer { state.entries = [:] }
            return state.entries.values.compactMap(\.task)
        }
        for task in tasks { task.cancel() }
    }
}

/// What ``ProfileClient/clear()`` runs once the store is empty: each ``ObservableProfiles``
/// forgets its entries.
final class ClearHandlers: Sendable {
    private let handlers = LockedValue<(next: UInt64, all: [UInt64: @Sendable () async -> Void])>((0, [:]))

    /// Adds `handler`; returns its key for ``remove(_:)``.
    func add(_ handler: @escaping @Sendable () async -> Void) -> UInt64 {
        handlers.withLock { handlers in
            handlers.next += 1
            handlers.all[handlers.next] = handler
            return handlers.next
        }
    }

    func remove(_ key: UInt64) {
        handlers.withLock { _ = $0.all.removeValue(forKey: key) }
    }

    func run() async {
        for handler in handlers.withLock({ Array($0.all.values) }) { await handler() }
    }
}
