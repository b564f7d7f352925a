import Foundation

extension ProfileClient {
    /// The most ids one multi-id event stream follows (the service's bound).
    static let maximumIDsPerStream = 1_000
    /// The most bytes of one stream's `ids=` value: the service refuses a request line over
    /// 32 KiB, and every id may carry a floor of up to ten digits — 1,000 ids of any length fit.
    static let maximumStreamQueryBytes = 32_000

    /// A live list of profiles: the profiles of `ids` in the order asked (each once) and the ids no
    /// profile has, as a new ``ProfileList`` whenever one of them changes.
    ///
    /// The list is a view of the client's one store, shared with ``events(for:)``, ``fetch(id:policy:)``,
    /// ``profiles(ids:)`` and the writes: an event for a member reaches every observer of its id
    /// and every list holding it, and a write through this client (optimistic at first) shows in
    /// every list holding the profile at once. An older version never replaces a newer one.
    ///
    /// - The client follows one event stream for the list (`GET /users/profiles/events`), or
    ///   several when the ids do not fit one: at most 1,000 ids, and an `ids=` value that fits the
    ///   service's request line with every floor (a few hundred ids, by the ids' lengths). Every
    ///   stream counts against the service's streams per client (32 by default).
    /// - The first value comes once every member is known (from this client's store or the
    ///   stream's first events). Then each change of the store gives at most one value: the events
    ///   of one read of the stream (a burst) are applied together, not one value per member.
    /// - A `deleted` event moves the member to ``ProfileList/missing``, and observers of its id get
    ///   ``ProfileEvent/deleted(id:)``; a later version brings it back.
    /// - A lost stream is reopened as ``events(for:)``'s is (``LiveUpdatePolicy``: after its
    ///   `retry:` hint once it proved healthy, else with growing backoff, `Retry-After` honoured),
    ///   with each member's floor (`id@version`, the highest version the client holds), so nothing
    ///   committed meanwhile is missed. A 401 is retried once with a fresh token.
    /// - While following fails (offline, 429, 503…) the list says so at once
    ///   (``ProfileList/streamFailure``, with the members not known yet in ``ProfileList/unknown``),
    ///   and says it is live again when the stream reopens.
    /// - A slow consumer gets the newest list. The stream ends when the consumer's task is
    ///   cancelled or the client is released, and throws a ``ProfileClientError`` when the service
    ///   refuses it for good: `validation` (400: an id is not a positive integer), `unauthorized`,
    ///   `forbidden`, `notFound` (404: a service without the endpoint), or `unexpectedStatus`
    ///   (414: a proxy with a shorter request line than the service's).
    ///
    /// ``ProfileClientConfiguration/followsLiveUpdates`` does not apply: following is the point.
    public func observeList(ids: [Int64]) -> AsyncThrowingStream<ProfileList, any Error> {
        var seen = Set<Int64>()
        let unique = ids.filter { seen.insert($0).inserted }
        let (stream, continuation) = AsyncThrowingStream<ProfileList, any Error>.makeStream(
            bufferingPolicy: .bufferingNewest(1))
        let token = listObservers.register(ids: unique, continuation: continuation)
        liveSubscriptions.retain(.list(token)) { [cache, streamFollowing, listObservers] in
            Task {
                await cache.publishMembers(of: unique)
                guard let streamFollowing else { return }
                let refusal = await withTaskGroup(of: TransportResponse?.self) { group -> TransportResponse? in
                    for (index, chunk) in Self.streamChunks(unique).enumerated() {
                        group.addTask {
                            await streamFollowing.followList(ids: chunk) { event in
                                switch event {
                                case .failed(let error, willRetry: true): listObservers.report(error, stream: index, of: token)
                                case .resumed: listObservers.report(nil, stream: index, of: token)
                                default: break  // a refusal for good ends the list with its error
                                }
                            }
                        }
                    }
                    for await case let refusal? in group {
                        group.cancelAll()
                        return refusal
                    }
                    return nil
                }
                if let refusal { listObservers.finish(token, throwing: Self.error(for: refusal)) }
            }
        }
        continuation.onTermination = { [weak self, listObservers] _ in
            self?.liveSubscriptions.release(.list(token))
            listObservers.remove(token)
        }
        return stream
    }

    /// `ids` split into the streams that follow them, in order: at most ``maximumIDsPerStream``
    /// each, and an `ids=` value of at most ``maximumStreamQueryBytes`` with every floor at its
    /// longest.
    static func streamChunks(_ ids: [Int64]) -> [[Int64]] {
        var chunks: [[Int64]] = []
        var current: [Int64] = []
        var bytes = 0
        for id in ids {
            let cost = String(id).utf8.count + "@2147483647,".utf8.count
            if !current.isEmpty, current.count == maximumIDsPerStream || bytes + cost > maximumStreamQueryBytes {
                chunks.append(current)
                current = []
                bytes = 0
            }
            current.append(id)
            bytes += cost
        }
        if !current.isEmpty { chunks.append(current) }
        return chunks
    }
}

extension StreamFollowing {
    /// Follows one multi-id stream until cancelled or refused for good; every batch of events
    /// goes into the store in one step.
    /// - Parameters:
    ///   - shared: the backoff it shares with the other streams of its ``FollowedStreams``.
    ///   - report: told `failed` on each failure and `resumed` when the stream opens after one.
    /// - Returns: the answer that refused the stream for good, or `nil` when cancelled.
    func followList(
        ids: [Int64], sharing shared: SharedBackoff? = nil, report: @escaping @Sendable (ProfileEvent) -> Void
    ) async -> TransportResponse? {
        let asked = Set(ids)
        let undecodable = LockedValue(false)  // the last batch held an event that did not decode
        return await follow(
            sharing: shared,
            classify: { response, _ in [400, 401, 403, 404, 414].contains(response.status) ? .final : .transient },
            makeRequest: { [cache, configuration] in
                // The resume point is the floors (the endpoint ignores Last-Event-ID): each id
                // at the highest version held now, so the service sends only what is newer.
                let floors = await cache.floors(for: ids)
                let members = ids.map { id in floors[id].map { "\(id)@\($0)" } ?? String(id) }
                let path = "/users/profiles/events?ids=" + members.joined(separator: ",")
                guard let url = URL(string: path, relativeTo: configuration.baseURL)?.absoluteURL else { return nil }
                return (url, ["Accept": "text/event-stream"])
            },
            report: report,
            onEvents: { [cache] events, generation, token in
                var failed = false
                let decoded = ProfileStreamEvent.decodeBatch(events) { error in
                    failed = true
                    report(.failed(error, willRetry: true))
                }
                // A batch that decodes after one that did not: the list is whole again.
                if !failed, !events.isEmpty, undecodable.withLock({ $0 }) { report(.resumed) }
                undecodable.withLock { $0 = failed }
                let members = decoded.filter { asked.contains($0.id) }
                let profiles = members.compactMap { event -> Int64? in
                    if case .profile(let profile) = event { return profile.id }
                    return nil
                }
                // Marked before they are held, so no write of the store catches them unmarked.
                let ownerViews = PrivateAnswers.ownerViewIDs(streamed: profiles, token: token)
                if !ownerViews.isEmpty { await cache.didReceiveOwnerViews(of: ownerViews) }
                if !members.isEmpty { await cache.didReceiveEvents(members, since: generation) }
            })
    }
}
