/// The live updates of every id one client follows — ``ProfileClient/events(for:)``,
/// ``ProfileClient/updates(for:)`` and every ``ObservableProfiles`` row alike — over multi-id
/// event streams (`/users/profiles/events`): 100 ids observed at once share one connection,
/// and a screen of hundreds of rows stays far within the service's streams per user (32 by
/// default).
///
/// Following changes in place: the changes of one moment (a scroll) gather for
/// ``settleDelay``, then ``StreamLayout`` says which streams to close and which to open. A stream
/// whose ids did not change is never touched: it keeps its connection and its backoff. New
/// streams resume every id at its floor (`id@version`), so nothing committed in between is
/// missed, and start where the other streams stand (``SharedBackoff``): rows scrolled in during
/// an outage, or after a 429's `Retry-After`, wait like the rest. Rows that appear are filled at
/// once: from the store, or by one list read (`GET /users/profiles?ids=`, 100 ids a request) for
/// those the store holds nothing of — not by waiting for their stream, which a proxy may buffer.
///
/// A stream's failure and recovery reach every id it serves as
/// ``ProfileEvent/failed(_:willRetry:)`` and ``ProfileEvent/resumed``. The streams are live
/// subscriptions of the client, so ``ProfileClient/pauseLiveUpdates()`` closes them and
/// ``ProfileClient/resumeLiveUpdates()`` reopens them.
final class FollowedStreams: Sendable {
    /// How long the changes of one moment (a scroll) may gather before the streams change.
    static let settleDelay: Duration = .milliseconds(20)

    private struct State {
        var layout = StreamLayout()
        /// A settle is scheduled or under way (which settles again what changed meanwhile).
        var isSettling = false
        /// Gives observers what the store holds of ids that appeared and reads the others.
        var fill: (@Sendable ([Int64]) async -> Void)?
    }

    private let state = LockedValue(State())
    private let following: StreamFollowing
    private let observers: ProfileObservers
    private let subscriptions: LiveSubscriptions
    private let backoff = SharedBackoff()
    /// ``settleDelay``; `nil` settles only at ``settleNow()`` (tests that say when a moment ends).
    private let settleDelay: Duration?

    init(
        following: StreamFollowing, observers: ProfileObservers, subscriptions: LiveSubscriptions,
        settleDelay: Duration? = FollowedStreams.settleDelay
    ) {
        self.following = following
        self.observers = observers
        self.subscriptions = subscriptions
        self.settleDelay = settleDelay
    }

    /// How the ids that appear are filled, beside their new stream (which may be buffered).
    func fillAppeared(with fill: @escaping @Sendable ([Int64]) async -> Void) {
        state.withLock { $0.fill = fill }
    }

    /// One more follow of `id`: it is live from the next settled moment on.
    func follow(_ id: Int64) {
        change { $0.follow(id) }
    }

    /// One follow of `id` less: the last one lets it go.
    func letGo(_ id: Int64) {
        change { $0.letGo(id) }
    }

    /// The ids followed now.
    var followedIDs: Set<Int64> {
        state.withLock { $0.layout.followedIDs }
    }

    /// Ends the moment now: applies what changed.
    func settleNow() async {
        let settles = state.withLock { state -> Bool in
            guard !state.isSettling else { return false }
            state.isSettling = true
            return true
        }
        if settles { await settle() }
    }

    private func change(_ body: (inout StreamLayout) -> Void) {
        let schedules = state.withLock { state -> Bool in
            body(&state.layout)
            guard settleDelay != nil, state.layout.isUnsettled, !state.isSettling else { return false }
            state.isSettling = true
            return true
        }
        guard schedules, let settleDelay else { return }
        Task {
            try? await Task.sleep(for: settleDelay)
            await settle()
        }
    }

    /// Applies the layout's changes until nothing more changed: closes what it closes (before
    /// anything opens, so there are never more streams than the layout has), then opens the new
    /// streams and fills their ids.
    private func settle() async {
        while true {
            let (changes, fill) = state.withLock { state -> (StreamLayout.Changes?, (@Sendable ([Int64]) async -> Void)?) in
                guard state.layout.isUnsettled else {
                    state.isSettling = false
                    return (nil, nil)
                }
                return (state.layout.settle(chunk: ProfileClient.streamChunks), state.fill)
            }
            guard let changes else { return }
            for key in changes.closed { await subscriptions.release(.followed(key))?.value }
            for (key, ids) in changes.opened {
                let (following, observers, backoff) = (following, observers, backoff)
                subscriptions.retain(.followed(key)) { [weak self] in
                    Task {
                        guard await Self.follow(ids, with: following, sharing: backoff, reportingTo: observers) else { return }
                        self?.streamEnded(key)
                    }
                }
            }
            let appeared = changes.opened.flatMap(\.ids)
            if let fill, !appeared.isEmpty { Task { await fill(appeared) } }
        }
    }

    /// The service refused stream `key` for good (a 403, a 401 after a fresh token): observers
    /// were told; its ids get a stream again when they are next followed.
    private func streamEnded(_ key: UInt64) {
        state.withLock { $0.layout.streamEnded(key) }
        subscriptions.release(.followed(key))
    }

    /// Follows `ids` over one stream until cancelled; its failures, recoveries and refusal for
    /// good go to the observers of every id it serves.
    /// - Returns: whether the service refused it for good.
    private static func follow(
        _ ids: [Int64], with following: StreamFollowing, sharing backoff: SharedBackoff,
        reportingTo observers: ProfileObservers
    ) async -> Bool {
        let refusal = await following.followList(ids: ids, sharing: backoff) { event in
            for id in ids { observers.publish(event, for: id) }
        }
        return refusal != nil
    }
}
