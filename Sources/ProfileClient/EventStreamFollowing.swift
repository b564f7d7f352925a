import Foundation

/// What a task following an event stream needs of its client, without keeping the client alive.
struct StreamFollowing: Sendable {
    var transport: any EventStreamTransport
    var configuration: ProfileClientConfiguration
    var tokens: BearerTokens
    var cache: LocalProfileCache
    var randomUnit: @Sendable () -> Double
    var sleep: @Sendable (Duration) async throws -> Void
    /// Where a stream the network failed sleeps out its backoff, to be woken when it is back.
    var wakeUps: NetworkWakeUps

    /// How an answer other than 200 is taken.
    enum Refusal {
        /// No attempt can succeed (bad request, auth): following ends.
        case final
        /// Expected, not a failure (a deleted profile's 404): retried with backoff, not reported.
        case expected
        /// Retried with backoff, and reported as a failure.
        case transient
    }

    /// Keeps one event stream open until the task is cancelled or the service refuses it for good.
    ///
    /// Reconnects as ``LiveUpdatePolicy`` says: failures count up until a stream proves healthy
    /// (an event, or ``LiveUpdatePolicy/healthyAfter`` open); a healthy stream the service closed
    /// is reopened after its `retry:` hint. A 401 is retried once at once with a fresh token.
    /// - Parameters:
    ///   - classify: how a refusal (an answer other than 200) is taken; told the store's
    ///     generation when the attempt began, as `onEvents` is (what either brings to the store
    ///     is dropped after a ``ProfileClient/clear()``).
    ///   - makeRequest: the URL and headers of the next attempt (the token is added here), built
    ///     anew for each so that it carries the latest resume point; `nil` ends following.
    ///   - report: told `failed` on each failure and `resumed` when a stream opens after one.
    ///   - onEvents: the events of each read of the body, as ``EventStreamTransport`` batches them,
    ///     with the token the stream was opened with (whose view of each profile it carries).
    ///   - shared: the backoff this stream shares with others: while they fail, its first attempt
    ///     waits where they stand, and its failures count with theirs.
    /// - Returns: the answer that ended following, or `nil` when cancelled.
    func follow(
        sharing shared: SharedBackoff? = nil,
        classify: (TransportResponse, _ generation: UInt64) async -> Refusal,
        makeRequest: () async -> (url: URL, headers: [String: String])?,
        report: @escaping @Sendable (ProfileEvent) -> Void,
        onEvents: @escaping @Sendable ([ServerSentEvent], _ generation: UInt64, _ token: String?) async -> Void
    ) async -> TransportResponse? {
        let healthyAfter = configuration.liveUpdates.healthyAfter
        let reconnection = LockedValue(StreamReconnection(policy: configuration.liveUpdates))
        var rejected: String?  // the token a 401 refused: the next attempt asks for a fresh one
        if let standing = shared?.current {
            reconnection.withLock { $0.join(afterFailures: standing.failures) }
            let wait = configuration.liveUpdates.delay(
                afterFailures: standing.failures, serverDelay: standing.serverDelay, randomUnit: randomUnit())
            guard await (standing.networkFailed ? wakeUps.sleep(wait, using: sleep) : pause(wait)) else { return nil }
        }
        while !Task.isCancelled {
            let generation = await cache.generation
            guard let (url, fields) = await makeRequest() else { return nil }
            var headers = fields
            // What ended the attempt, unless a stream that proved healthy was closed.
            let failure: (error: ProfileClientError?, retryHint: Duration?, serverDelay: Duration?)
            let delivered = LockedValue(false)
            let opened = ContinuousClock.now
            var noAnswer = false  // the network failed the attempt: no HTTP answer at all
            do throws(ProfileClientError) {
                let token = try await tokens.token(replacing: rejected)
                if let token { headers["Authorization"] = "Bearer \(token)" }
                let refreshing = rejected != nil
                rejected = nil
                // The longest silence allowed: well above the service's 15 s heartbeat.
                let request = TransportRequest(
                    method: "GET", url: url, headers: headers, body: nil, timeout: .seconds(45))
                let end: EventStreamEnd
                do {
                    end = try await transport.stream(request) { [wakeUps] events in
                        wakeUps.answered()
                        shared?.streamOpened()
                        if let resumed = reconnection.withLock({ $0.streamOpened() }) { report(resumed) }
                        guard !events.isEmpty else { return }
                        delivered.withLock { $0 = true }
                        await onEvents(events, generation, token)
                    }
                } catch {
                    if Task.isCancelled { return nil }
                    noAnswer = error.isNetworkFailure
                    throw ProfileClient.error(for: error)
                }
                let healthy = delivered.withLock { $0 } || ContinuousClock.now - opened >= healthyAfter
                switch end {
                case .closed(let retry) where healthy:
                    guard await pause(reconnection.withLock { $0.healthyStreamClosed(retryHint: retry) }) else {
                        return nil
                    }
                    continue
                case .closed(let retry):
                    // Closed before it proved healthy (a proxy's 200 that ends at once): a failure.
                    failure = (.transport("the stream ended before it proved healthy"), retry, retry)
                case .refused(let response):
                    wakeUps.answered()
                    if response.status == 401, let token, !refreshing {
                        rejected = token
                        continue
                    }
                    let error = ProfileClient.error(for: response)
                    let retryAfter = response.headers["retry-after"].flatMap { RetryPolicy.parseRetryAfter($0) }
                    switch await classify(response, generation) {
                    case .final:
                        report(.failed(error, willRetry: false))
                        return response
                    case .expected: failure = (nil, nil, retryAfter)
                    case .transient: failure = (error, nil, retryAfter)
                    }
                }
            } catch {
                failure = (error, nil, nil)  // no token, or no connection
            }
            let healthy = delivered.withLock { $0 } || ContinuousClock.now - opened >= healthyAfter
            let (wait, event) = reconnection.withLock {
                $0.attemptFailed(
                    reporting: failure.error, healthy: healthy, retryHint: failure.retryHint,
                    serverDelay: failure.serverDelay, randomUnit: randomUnit())
            }
            if let event { report(event) }
            shared?.attemptFailed(
                failures: reconnection.withLock { $0.failures }, serverDelay: failure.serverDelay, networkFailed: noAnswer)
            guard await (noAnswer && wait > .zero ? wakeUps.sleep(wait, using: sleep) : pause(wait)) else { return nil }
        }
        return nil
    }

    /// Waits `duration` (not at all for zero); false when cancelled meanwhile.
    private func pause(_ duration: Duration) async -> Bool {
        guard duration > .zero else { return !Task.isCancelled }
        do {
            try await sleep(duration)
            return true
        } catch {
            return false
        }
    }
}
