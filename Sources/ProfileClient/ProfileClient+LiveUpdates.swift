import Foundation

extension ProfileClient {
    /// What following a stream needs of this client, without keeping it alive; `nil` when the
    /// client follows none (unit tests without an event transport).
    var streamFollowing: StreamFollowing? {
        eventTransport.map {
            StreamFollowing(
                transport: $0, configuration: configuration, tokens: tokens, cache: cache, randomUnit: randomUnit,
                sleep: sleep, wakeUps: networkWakeUps)
        }
    }

    /// What ``ObservableProfiles`` follows its ids with: multi-id streams for all of them;
    /// `nil` when the client follows no streams (no event transport, or
    /// ``ProfileClientConfiguration/followsLiveUpdates`` off).
    @MainActor
    func groupedFollowing() -> GroupedFollowing? {
        guard let following = streamFollowing, configuration.followsLiveUpdates else { return nil }
        return GroupedFollowing(following: following, observers: observers, subscriptions: liveSubscriptions)
    }

    /// The events of `id` as ``events(for:)`` gives them, without following its own stream.
    func storeEvents(for id: Int64) -> AsyncStream<ProfileEvent> {
        let stream = observers.events(for: id)
        restoreStore()
        return stream
    }

    /// Follows `id` while anyone observes it, unless following is off or already running.
    func startFollowing(_ id: Int64) {
        guard let following = streamFollowing, configuration.followsLiveUpdates else { return }
        liveSubscriptions.retain(.profile(id)) { [observers, liveSubscriptions] in
            Task {
                await following.followProfile(id: id, observers: observers)
                if !Task.isCancelled { liveSubscriptions.stopped(.profile(id)) }
            }
        }
    }

    /// Closes every event stream the client follows, for an app going to the background (where
    /// push notifications, not open sockets, are for a sleeping app). Observers and lists stay
    /// and keep what they have; streams of ids observed meanwhile wait for
    /// ``resumeLiveUpdates()``.
    public func pauseLiveUpdates() {
        liveSubscriptions.pause()
    }

    /// Reopens the streams of everything still observed, each resuming from the floor the
    /// client holds, so nothing committed while paused is missed; a stream asleep in backoff after
    /// the network failed it reconnects at once (``networkDidReturn()``).
    public func resumeLiveUpdates() {
        liveSubscriptions.resume()
        networkWakeUps.wakeAll()
    }

    /// The app learned that the network is back (a reachability callback): every event stream
    /// asleep in backoff because the network failed it reconnects at once, rather than after a
    /// backoff an outage made long (up to ``LiveUpdatePolicy/maximumDelay``). Any request or
    /// stream of the client that gets an answer does the same by itself. A stream the service
    /// refused (a 429 or 503 with `Retry-After`) keeps the wait the service asked for.
    public func networkDidReturn() {
        networkWakeUps.wakeAll()
    }
}

extension StreamFollowing {
    /// Follows `id`'s event stream until cancelled or refused for good: each `profile` event goes
    /// through the store like a fetch (an older version never replaces a newer one). Each attempt
    /// resumes with `Last-Event-ID` at the id's floor, so nothing committed meanwhile is missed.
    ///
    /// A 404 (the profile was deleted, or does not exist yet) reaches observers as `deleted`, and
    /// following goes on with backoff, so a profile created again comes back. 400, 401 (after one
    /// fresh token) and 403 end following; observers are told
    /// ``ProfileEvent/failed(_:willRetry:)`` without retry.
    func followProfile(id: Int64, observers: ProfileObservers) async {
        guard let url = URL(string: "/users/profile/\(id)/events", relativeTo: configuration.baseURL)?.absoluteURL
        else { return }
        _ = await follow(
            classify: { [cache] response, generation in
                switch response.status {
                case 404:
                    await cache.didLearnMissing(id: id, since: generation)
                    return .expected
                case 400, 401, 403: return .final
                default: return .transient
                }
            },
            makeRequest: { [cache] in
                var headers = ["Accept": "text/event-stream"]
                if let floor = await cache.floor(id: id) { headers["Last-Event-ID"] = String(floor) }
                return (url, headers)
            },
            report: { observers.publish($0, for: id) },
            onEvents: { [cache] events, generation, token in
                for event in ProfileStreamEvent.decodeBatch(events, report: { observers.publish(.failed($0, willRetry: true), for: id) }) {
                    switch event {
                    case .profile(let profile) where profile.id == id:
                        // Marked before it is held, so no write of the store catches it unmarked.
                        let ownerViews = PrivateAnswers.ownerViewIDs(streamed: [id], token: token)
                        if !ownerViews.isEmpty { await cache.didReceiveOwnerViews(of: ownerViews) }
                        await cache.didReceiveEvent(profile, since: generation)
                    case .deleted(id): await cache.didLearnMissing(id: id, since: generation)
                    default: continue
                    }
                }
            })
    }
}
