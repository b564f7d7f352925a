public import Foundation

/// Jittered exponential backoff: attempt *n* waits a random time between half and all of
/// `min(maximumDelay, initialDelay × 2ⁿ⁻¹)`, or what `Retry-After` asks when that is longer.
///
/// Reads are retried on 503, 504 and connection errors; writes only when the request surely never
/// reached the server (connection refused, host not found).
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts in all, the first included; 1 disables retries.
    public var maximumAttempts: Int
    public var initialDelay: Duration
    public var maximumDelay: Duration
    /// A `Retry-After` longer than this is not waited for: the call fails with
    /// ``ProfileClientError/unavailable(retryAfter:)`` at once.
    public var maximumRetryAfter: Duration

    public init(
        maximumAttempts: Int = 5, initialDelay: Duration = .milliseconds(100), maximumDelay: Duration = .seconds(5),
        maximumRetryAfter: Duration = .seconds(30)
    ) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.maximumRetryAfter = maximumRetryAfter
    }

    /// The wait before attempt `attempt + 1`, after attempt `attempt` (1-based) failed; `nil`
    /// when there is no further attempt or `retryAfter` exceeds ``maximumRetryAfter``.
    /// - Parameter randomUnit: a number in `0...1` (the jitter).
    public func delay(afterAttempt attempt: Int, retryAfter: Duration?, randomUnit: Double) -> Duration? {
        guard attempt >= 1, attempt < maximumAttempts else { return nil }
        if let retryAfter, retryAfter > maximumRetryAfter { return nil }
        var ceiling = initialDelay
        for _ in 1..<attempt where ceiling < maximumDelay { ceiling *= 2 }
        ceiling = min(ceiling, maximumDelay)
        let jittered = ceiling / 2 + ceiling / 2 * min(max(randomUnit, 0), 1)
        guard let retryAfter else { return jittered }
        return max(retryAfter, jittered)
    }

    /// Parses `Retry-After` (RFC 9110 §10.2.3): delay seconds or an HTTP-date.
    public static func parseRetryAfter(_ value: String, now: Date = Date()) -> Duration? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(text) { return seconds >= 0 ? .seconds(seconds) : nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = formatter.date(from: text) else { return nil }
        let interval = max(0, date.timeIntervalSince(now))
        return .milliseconds(Int64((interval * 1000).rounded(.up)))
    }
}
