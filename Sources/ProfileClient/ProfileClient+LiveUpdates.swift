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

    /// The events of `id` as ``events(for:)`` gives them, without following it (the caller
    /// follows it with ``followedStreams``).
    func storeEvents(for id: Int64) -> AsyncStream<ProfileEvent> {
        let stream = observers.events(for: id)
        restoreStore()
        return stream
    }

    /// Ids that just got a stream: the store gives their observers what it holds, and the ids it
    /// holds nothing of are read with one list request per 100, so a row that appears shows its
    /// profile after one round trip rather than when its stream delivers. A failure is not
    /// reported here: the stream reports its own.
    func fill(appeared ids: [Int64]) async {
        let unknown = await cache.unknownIDs(among: ids)
        guard !unknown.isEmpty else { return }
        _ = try? await profiles(ids: unknown)
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
