import Foundation

/// What a task following an event stream needs of its client, without keeping the client alive.
struct StreamFollowing: Sendable {
    var transport: any EventStreamTransport
    var configuration: ProfileClientConfiguration
    var cache: LocalProfileCache
    var randomUnit: @Sendable () -> Double
    var sleep: @Sendable (Duration) async throws -> Void

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
    ///   - classify: how a refusal (an answer other than 200) is taken.
    ///   - makeRequest: the URL and headers of the next attempt (the token is added here), built
    ///     anew for each so that it carries the latest resume point; `nil` ends following.
    ///   - report: told `failed` on each failure and `resumed` when a stream opens after one.
    ///   - onEvents: the events of each read of the body, as ``EventStreamTransport`` batches them.
    /// - Returns: the answer that ended following, or `nil` when cancelled.
    func follow(
        classify: (TransportResponse) async -> Refusal,
        makeRequest: () async -> (url: URL, headers: [String: String])?,
        report: @escaping @Sendable (ProfileEvent) -> Void,
        onEvents: @escaping @Sendable ([ServerSentEvent]) async -> Void
    ) async -> TransportResponse? {
        let policy = configuration.liveUpdates
        var failures = 0
        var retryHint: Duration?  // the service's last `retry:`
        var rejected: String?  // the token a 401 refused: the next attempt asks for a fresh one
        let failing = LockedValue(false)  // a failure was reported and no stream opened since
        while !Task.isCancelled {
            guard let (url, fields) = await makeRequest() else { return nil }
            var headers = fields
            var serverDelay: Duration?
            let token: String?
            do {
                token = try await configuration.bearerToken(replacing: rejected)
            } catch {
                failing.withLock { $0 = true }
                report(.failed(error, willRetry: true))
                failures += 1
                guard await pause(policy.delay(afterFailures: failures, serverDelay: nil, randomUnit: randomUnit()))
                else { return nil }
                continue
            }
            if let token { headers["Authorization"] = "Bearer \(token)" }
            let refreshing = rejected != nil
            rejected = nil
            // The longest silence allowed: well above the service's 15 s heartbeat.
            let request = TransportRequest(method: "GET", url: url, headers: headers, body: nil, timeout: .seconds(45))
            let delivered = LockedValue(false)
            let opened = ContinuousClock.now
            do {
                let end = try await transport.stream(request) { events in
                    let recovered = failing.withLock { failing in
                        defer { failing = false }
                        return failing
                    }
                    if recovered { report(.resumed) }
                    if events.isEmpty { return }
                    delivered.withLock { $0 = true }
                    await onEvents(events)
                }
                switch end {
                case .closed(let retry):
                    retryHint = retry ?? retryHint
                    if delivered.withLock({ $0 }) || ContinuousClock.now - opened >= policy.healthyAfter {
                        // A stream that proved healthy: resume after the service's hint, failures forgotten.
                        failures = 0
                        guard await pause(min(retryHint ?? .zero, policy.maximumServerDelay)) else { return nil }
                        continue
                    }
                    serverDelay = retryHint
                case .refused(let response):
                    if response.status == 401, let token, !refreshing {
                        rejected = token
                        continue
                    }
                    let refusal = await classify(response)
                    let error = ProfileClient.error(for: response)
                    if refusal == .final {
                        report(.failed(error, willRetry: false))
                        return response
                    }
                    if refusal == .transient {
                        failing.withLock { $0 = true }
                        report(.failed(error, willRetry: true))
                    }
                    serverDelay = response.headers["retry-after"].flatMap { RetryPolicy.parseRetryAfter($0) }
                }
            } catch {
                if Task.isCancelled { return nil }
                failing.withLock { $0 = true }
                report(.failed(.transport(error.description), willRetry: true))
            }
            if delivered.withLock({ $0 }) || ContinuousClock.now - opened >= policy.healthyAfter { failures = 0 }
            failures += 1
            guard await pause(policy.delay(afterFailures: failures, serverDelay: serverDelay, randomUnit: randomUnit()))
            else { return nil }
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
