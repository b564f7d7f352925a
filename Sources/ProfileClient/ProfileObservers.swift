/// The ``ProfileClient/events(for:)`` and ``ProfileClient/updates(for:)`` streams of one client,
/// by profile id.
///
/// All state sits in a ``LockedValue``. Yields happen outside the lock; the state events
/// (`updated`, `deleted`) are serialized by ``LocalProfileCache``, their only publisher.
final class ProfileObservers: Sendable {
    private struct Observer {
        var deliver: @Sendable (ProfileEvent) -> Void
        var finish: @Sendable () -> Void
    }

    private struct State {
        var observers: [Int64: [UInt64: Observer]] = [:]
        /// The last state published per id (`updated`, `pending` or `deleted`): a new observer starts with it.
        var latest: [Int64: ProfileEvent] = [:]
        var nextToken: UInt64 = 0
    }

    private let state = LockedValue(State())

    /// Every event of `id`, starting with its latest state, if any.
    /// - Parameter onTermination: runs once when the consumer stops (cancelled or released).
    func events(for id: Int64, onTermination: @escaping @Sendable () -> Void = {}) -> AsyncStream<ProfileEvent> {
        let (stream, continuation) = AsyncStream<ProfileEvent>.makeStream(bufferingPolicy: .bufferingNewest(64))
        register(id, continuation: continuation, onTermination: onTermination) { continuation.yield($0) }
        return stream
    }

    /// The profiles of `id`'s `updated` and `pending` events, starting with the latest one, if any.
    func profiles(for id: Int64, onTermination: @escaping @Sendable () -> Void = {}) -> AsyncStream<Profile> {
        let (stream, continuation) = AsyncStream<Profile>.makeStream(bufferingPolicy: .bufferingNewest(64))
        register(id, continuation: continuation, onTermination: onTermination) { event in
            switch event {
            case .updated(let profile), .pending(let profile): continuation.yield(profile)
            default: break
            }
        }
        return stream
    }

    /// Gives `event` to every observer of `id`; a state equal to the last one given is not given
    /// again, unless `again` (what goes with it changed: a profile restored from the persisted
    /// store, now confirmed by the service).
    func publish(_ event: ProfileEvent, for id: Int64, again: Bool = false) {
        let receivers: [Observer] = state.withLock { state in
            switch event {
            case .updated, .pending, .deleted:
                guard state.latest[id] != event || again else { return [] }
                state.latest[id] = event
            case .failed, .resumed:
                break
            }
            return state.observers[id].map { Array($0.values) } ?? []
        }
        for observer in receivers { observer.deliver(event) }
    }

    /// Whether anyone observes `id` now.
    func isObserved(_ id: Int64) -> Bool {
        state.withLock { $0.observers[id] != nil }
    }

    /// Forgets the last state of `id` (the store evicted it).
    func forget(_ id: Int64) {
        state.withLock { state in state.latest[id] = nil }
    }

    /// Forgets the last state of every id (the client was cleared): a new observer starts with
    /// nothing of the previous session.
    func forgetAll() {
        state.withLock { state in state.latest = [:] }
    }

    func finishAll() {
        let all = state.withLock { state in
            let all = state.observers.values.flatMap(\.values)
            state.observers = [:]
            return all
        }
        for observer in all { observer.finish() }
    }

    private func register<Element>(
        _ id: Int64, continuation: AsyncStream<Element>.Continuation,
        onTermination: @escaping @Sendable () -> Void, deliver: @escaping @Sendable (ProfileEvent) -> Void
    ) {
        let observer = Observer(deliver: deliver, finish: { continuation.finish() })
        let token: UInt64 = state.withLock { state in
            let token = state.nextToken
            state.nextToken += 1
            state.observers[id, default: [:]][token] = observer
            if let latest = state.latest[id] { deliver(latest) }
            return token
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { state in
                state.observers[id]?[token] = nil
                if state.observers[id]?.isEmpty == true { state.observers[id] = nil }
            }
            onTermination()
        }
    }
}
