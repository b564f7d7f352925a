import Foundation

/// What a list shows for one of its ids.
enum ListMember: Sendable, Hashable {
    /// The profile shown; `isPending` for an edit of this client not confirmed yet.
    case profile(Profile, isPending: Bool)
    /// The service said no profile has the id.
    case missing
}

/// The ``ProfileClient/observeList(ids:)`` streams of one client: each list's ids in order and
/// what the store shows for each.
///
/// ``update(_:)`` takes every change of one step of ``LocalProfileCache`` (a fetch, a write, a
/// batch of stream events) at once, so a list yields at most one ``ProfileList`` per step, and
/// only once every member is known. All state sits in a ``LockedValue``; yields happen outside it, and
/// updates are serialized by the cache, their only caller.
final class ProfileListObservers: Sendable {
    typealias Continuation = AsyncThrowingStream<ProfileList, any Error>.Continuation

    private struct List {
        /// Distinct, in the order asked.
        var ids: [Int64]
        var members: [Int64: ListMember] = [:]
        var continuation: Continuation
        var lastYielded: ProfileList?
        /// Where each member shown as a profile sits in ``lastYielded``'s `profiles`.
        var profileIndex: [Int64: Int] = [:]
        /// Why following each of the list's streams fails now, by stream.
        var failures: [Int: ProfileClientError] = [:]

        /// The next value to yield once `changed` members changed (none: a stream's failure
        /// changed); `nil` when there is none, or it is the one yielded last. When each changed
        /// member was a profile and still is one, the last value with those profiles replaced in
        /// place — the cost of what changed, not of the list; else the list built anew (``value``).
        mutating func next(changed: [Int64]) -> ProfileList? {
            if !changed.isEmpty, var list = lastYielded, failures.isEmpty, list.streamFailure == nil {
                var inPlace = true
                for id in changed {
                    guard let index = profileIndex[id], case .profile(let profile, let isPending)? = members[id] else {
                        inPlace = false
                        break
                    }
                    list.profiles[index] = profile
                    if isPending { list.pending.insert(id) } else { list.pending.remove(id) }
                }
                if inPlace { return list }
            }
            rebuilds += 1
            guard let list = value, list != lastYielded else { return nil }
            profileIndex = Dictionary(uniqueKeysWithValues: list.profiles.enumerated().map { ($1.id, $0) })
            return list
        }

        /// How many times the list was built anew (for tests of the cost).
        var rebuilds = 0

        /// The list to show: once every member is known, or at once while following fails (with
        /// the members not known yet as ``ProfileList/unknown``).
        var value: ProfileList? {
            let failure = failures.sorted { $0.key < $1.key }.first?.value
            guard members.count == ids.count || failure != nil else { return nil }
            var list = ProfileList(profiles: [], missing: [], streamFailure: failure)
            for id in ids {
                switch members[id] {
                case .profile(let profile, let isPending)?:
                    list.profiles.append(profile)
                    if isPending { list.pending.insert(id) }
                case .missing?: list.missing.append(id)
                case nil: list.unknown.append(id)
                }
            }
            return list
        }
    }

    private struct State {
        var lists: [UInt64: List] = [:]
        /// Which lists hold an id.
        var listsByID: [Int64: Set<UInt64>] = [:]
        var nextToken: UInt64 = 0
    }

    private let state = LockedValue(State())

    /// Adds a list of distinct `ids` whose values go to `continuation`; nothing is known of its
    /// members until an update says (an empty list is complete at once).
    /// - Returns: the token for ``remove(_:)`` and ``finish(_:throwing:)``.
    func register(ids: [Int64], continuation: Continuation) -> UInt64 {
        let token = state.withLock { state in
            let token = state.nextToken
            state.nextToken += 1
            state.lists[token] = List(ids: ids, continuation: continuation)
            for id in ids { state.listsByID[id, default: []].insert(token) }
            return token
        }
        if ids.isEmpty { continuation.yield(ProfileList(profiles: [], missing: [])) }
        return token
    }

    /// Gives each list holding a changed id one new value, if it is complete and not the one it
    /// had.
    func update(_ changes: [Int64: ListMember]) {
        let yields: [(Continuation, ProfileList)] = state.withLock { state in
            var touched: [UInt64: [Int64]] = [:]
            for (id, member) in changes {
                for token in state.listsByID[id] ?? [] where state.lists[token]?.members[id] != member {
                    state.lists[token]?.members[id] = member
                    touched[token, default: []].append(id)
                }
            }
            var yields: [(Continuation, ProfileList)] = []
            for (token, changed) in touched {
                guard let value = state.lists[token]?.next(changed: changed), let continuation = state.lists[token]?.continuation
                else { continue }
                state.lists[token]?.lastYielded = value
                yields.append((continuation, value))
            }
            return yields
        }
        for (continuation, value) in yields { continuation.yield(value) }
    }

    /// Following stream `stream` of list `token` fails (`failure`), or works again (`nil`): the
    /// list gives a new value saying so.
    func report(_ failure: ProfileClientError?, stream: Int, of token: UInt64) {
        let yield: (Continuation, ProfileList)? = state.withLock { state in
            guard state.lists[token] != nil else { return nil }
            state.lists[token]?.failures[stream] = failure
            guard let value = state.lists[token]?.next(changed: []), let continuation = state.lists[token]?.continuation
            else { return nil }
            state.lists[token]?.lastYielded = value
            return (continuation, value)
        }
        if let (continuation, value) = yield { continuation.yield(value) }
    }

    /// How many times each list was built anew, by token (for tests of the cost).
    var rebuilds: [UInt64: Int] {
        state.withLock { $0.lists.mapValues(\.rebuilds) }
    }

    /// Whether an observed list holds `id`.
    func holds(_ id: Int64) -> Bool {
        state.withLock { $0.listsByID[id] != nil }
    }

    /// Forgets a list (its consumer stopped).
    func remove(_ token: UInt64) {
        _ = take(token)
    }

    /// Ends a list's stream, with `error` when following it failed for good.
    func finish(_ token: UInt64, throwing error: (any Error)?) {
        take(token)?.finish(throwing: error)
    }

    func finishAll() {
        let all = state.withLock { state in
            defer { state = State(nextToken: state.nextToken) }
            return state.lists.values.map(\.continuation)
        }
        for continuation in all { continuation.finish() }
    }

    /// Removes a list and returns its continuation, to be finished outside the lock (finishing
    /// runs the stream's termination handler, which calls ``remove(_:)``).
    private func take(_ token: UInt64) -> Continuation? {
        state.withLock { state in
            guard let list = state.lists.removeValue(forKey: token) else { return nil }
            for id in list.ids {
                state.listsByID[id]?.remove(token)
                if state.listsByID[id]?.isEmpty == true { state.listsByID[id] = nil }
            }
            return list.continuation
        }
    }
}
