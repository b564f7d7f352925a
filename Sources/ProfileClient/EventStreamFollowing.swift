import Foundation

extension ProfileClient {
    /// Keeps one event stream open until the task is cancelled or the service refuses it for good.
    ///
    /// A stream the service ends after it lived ≥ 1 s (its lifetime, a token's expiry, a drain) is
    /// reopened at once; a lost, refused or short-lived one after a jittered backoff (250 ms
    /// doubling to 30 s), or after `Retry-After` when the service gave one (503, 429).
    /// - Parameters:
    ///   - finalStatuses: answers after which no attempt can succeed (bad request, auth): following ends.
    ///   - makeRequest: the URL and headers of the next attempt (the token is added here), built
    ///     anew for each so that it carries the latest resume point; `nil` ends following.
    ///   - onEvents: the events of each read of the body, as ``EventStreamTransport`` batches them.
    /// - Returns: the answer that ended following, or `nil` when cancelled.
    static func followEventStream(
        transport: any EventStreamTransport, configuration: ProfileClientConfiguration,
        randomUnit: @Sendable () -> Double, finalStatuses: Set<Int>,
        makeRequest: () async -> (url: URL, headers: [String: String])?,
        onEvents: @escaping @Sendable ([ServerSentEvent]) async -> Void
    ) async -> TransportResponse? {
        var failures = 0
        while !Task.isCancelled {
            guard let (url, fields) = await makeRequest() else { return nil }
            var headers = fields
            if let provider = configuration.tokenProvider, let token = try? await provider() {
                headers["Authorization"] = "Bearer \(token)"
            }
            // The longest silence allowed: well above the service's 15 s heartbeat.
            let request = TransportRequest(method: "GET", url: url, headers: headers, body: nil, timeout: .seconds(45))
            var retryAfter: Duration?
            let opened = ContinuousClock.now
            do {
                switch try await transport.stream(request, onEvents: onEvents) {
                case .closed where ContinuousClock.now - opened >= .seconds(1):
                    // The service ended a stream that lived: resume at once from the latest point.
                    failures = 0
                    continue
                case .closed:
                    failures = 0
                case .refused(let response):
                    if finalStatuses.contains(response.status) { return response }
                    retryAfter = response.headers["retry-after"].flatMap { RetryPolicy.parseRetryAfter($0) }
                }
            } catch {
                if Task.isCancelled { return nil }
            }
            failures += 1
            let backoff = RetryPolicy(maximumAttempts: .max, initialDelay: .milliseconds(250), maximumDelay: .seconds(30))
            let wait = backoff.delay(afterAttempt: failures, retryAfter: retryAfter, randomUnit: randomUnit()) ?? .seconds(30)
            do { try await Task.sleep(for: wait) } catch { return nil }
        }
        return nil
    }
}
