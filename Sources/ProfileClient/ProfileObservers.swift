import Synchronization

/// The ``ProfileClient/updates(for:)`` streams of one client, by profile id.
///
/// `@unchecked`-free: all state sits in a `Mutex`. Yields happen outside the lock; publishing is
/// serialized by ``LocalProfileCache``, the only caller of ``publish(_:)`` and ``forget(_:)``.
final class ProfileObservers: Sendable {
    private struct State {
        var continuations: [Int64: [UInt64: AsyncStream<Profile>.Continuation]] = [:]
        var latest: [Int64: Profile] = [:]
        var nextToken: UInt64 = 0
    }

    private let state = Mutex(State())

    /// A stream that starts with the latest profile published for `id`, if any.
    /// - Parameter onTermination: runs once when the consumer stops (cancelled or released).
    func stream(for id: Int64, onTermination: @escaping @Sendable () -> Void = {}) -> AsyncStream<Profile> {
        let (stream, continuation) = AsyncStream<Profile>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let token: UInt64 = state.withLock { state in
            let token = state.nextToken
            state.nextToken += 1
            state.continuations[id, default: [:]][token] = continuation
            if let latest = state.latest[id] { continuation.yield(latest) }
            return token
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { state in
                state.continuations[id]?[token] = nil
                if state.continuations[id]?.isEmpty == true { state.continuations[id] = nil }
            }
            onTermination()
        }
        return stream
    }

    /// Gives `profile` to every observer of its id, unless it equals the last one given.
    func publish(_ profile: Profile) {
        let receivers: [AsyncStream<Profile>.Continuation] = state.withLock { state in
            guard state.latest[profile.id] != profile else { return [] }
            state.latest[profile.id] = profile
            return state.continuations[profile.id].map { Array($0.values) } ?? []
        }
        for continuation in receivers { continuation.yield(profile) }
    }

    /// The id's profile no longer exists: a new observer does not start with it. (Observers that
    /// have it keep it; an `AsyncStream<Profile>` has no value for "none".)
    func forget(_ id: Int64) {
        state.withLock { state in state.latest[id] = nil }
    }

    func finishAll() {
        let all = state.withLock { state in
            let all = state.continuations.values.flatMap(\.values)
            state.continuations = [:]
            return all
        }
        for continuation in all { continuation.finish() }
    }
}
