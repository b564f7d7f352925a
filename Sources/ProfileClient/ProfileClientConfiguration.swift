public import Foundation

/// Where the service is and how a ``ProfileClient`` talks to it.
///
/// ```swift
/// var configuration = ProfileClientConfiguration(baseURL: URL(string: "https://profiles.example")!)
/// configuration.tokenProvider = { try await session.accessToken() }
/// let client = ProfileClient(configuration: configuration)
/// ```
public struct ProfileClientConfiguration: Sendable {
    /// Returns the bearer token for the next request, or `nil` to send none. Called before every
    /// attempt, so it can refresh an expiring token.
    public typealias TokenProvider = @Sendable () async throws -> String?

    /// The service's root, such as `http://127.0.0.1:8080`.
    public var baseURL: URL
    /// How long a profile this client wrote answers reads of its id without a network call.
    public var readYourWritesWindow: Duration = .seconds(10)
    /// Backoff of reads (and of writes that surely never reached the server).
    public var retry: RetryPolicy = RetryPolicy()
    /// Deadline of one HTTP attempt.
    public var requestTimeout: Duration = .seconds(10)
    /// Sent as `Authorization: Bearer <token>`; `nil` sends no `Authorization` header. A provider
    /// that throws ends the attempt with ``ProfileClientError/tokenUnavailable(_:)``.
    public var tokenProvider: TokenProvider?
    /// Told the token the service refused (401) before the provider is asked once more, so it can
    /// drop a cached token and return a fresh one; a second 401 is final.
    public var tokenRejected: (@Sendable (_ token: String) async -> Void)?
    /// How many profile ids the client's store keeps beyond those in use: ids nobody observes are
    /// forgotten least recently used first.
    public var storeCapacity = 1_000
    /// Reconnection of the event streams that ``ProfileClient/events(for:)`` and
    /// ``ProfileClient/observeList(ids:)`` follow.
    public var liveUpdates = LiveUpdatePolicy()
    /// Whether ``ProfileClient/events(for:)`` and ``ProfileClient/updates(for:)`` follow the
    /// service's event stream of the id, so changes committed anywhere (other devices, other
    /// instances, SQL) reach the observers.
    public var followsLiveUpdates = true
    /// Where the store is kept between launches (opt-in; `nil`: nowhere). A cold start shows the
    /// profiles it holds at once (the file is read at the store's first use, off the caller's
    /// thread, not when the client is made) and revalidates each with `If-None-Match` when read. One file
    /// per app (and per user: ``ProfileClient/clear()`` on logout removes it), in the app's caches
    /// or application-support directory; at most ``storeCapacity`` profiles, written whole every
    /// ``persistenceInterval`` while profiles change, and by ``ProfileClient/saveStore()``.
    public var persistenceFile: URL?
    /// How often, at most, the store is written while profiles change.
    public var persistenceInterval: Duration = .seconds(2)
    /// Whether the persisted store may keep a profile the service answered in its owner's view
    /// (`Cache-Control: private`: with fields only the owner reads, such as an email). Off by
    /// default: such a profile is kept in memory for the session and never written to
    /// ``persistenceFile``, so the fields stay off the device's disk.
    public var persistsPrivateProfiles = false

    public init(baseURL: URL, tokenProvider: TokenProvider? = nil) {
        self.baseURL = baseURL
        self.tokenProvider = tokenProvider
    }
}

/// How a ``ProfileClient`` reconnects its event streams.
///
/// A lost, refused or unhealthy stream is reopened after a jittered backoff: attempt *n* waits
/// between half and all of `min(maximumDelay, initialDelay × 2ⁿ⁻¹)`. Failures count up until a
/// stream proves healthy — it delivered an event, or stayed open for ``healthyAfter`` — so a proxy
/// that answers and closes at once is retried ever more slowly, while a stream that lived an hour
/// and then failed starts over at ``initialDelay``. A stream that proved healthy and was closed by
/// the service is reopened after its `retry:` hint (at once without one). The service's asked
/// waits, `retry:` and `Retry-After`, are honoured up to ``maximumServerDelay``.
public struct LiveUpdatePolicy: Sendable, Hashable {
    /// The ceiling of the first wait after a failure.
    public var initialDelay: Duration
    /// The highest ceiling the doubling reaches.
    public var maximumDelay: Duration
    /// How long a stream that delivered no event must stay open to count as healthy; keep it
    /// below the service's stream lifetime.
    public var healthyAfter: Duration
    /// The longest `retry:` or `Retry-After` waited for; a longer one is cut to this.
    public var maximumServerDelay: Duration

    /// The defaults: 250 ms doubling to 30 s, healthy after 10 s, the service's waits up to 5 min.
    public init(
        initialDelay: Duration = .milliseconds(250), maximumDelay: Duration = .seconds(30),
        healthyAfter: Duration = .seconds(10), maximumServerDelay: Duration = .seconds(300)
    ) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.healthyAfter = healthyAfter
        self.maximumServerDelay = maximumServerDelay
    }

    /// The wait before reconnecting after `failures` consecutive failures (at least 1), and at
    /// least what the service asked (`serverDelay`, capped at ``maximumServerDelay``).
    /// - Parameter randomUnit: a number in `0...1` (the jitter).
    func delay(afterFailures failures: Int, serverDelay: Duration?, randomUnit: Double) -> Duration {
        let backoff = RetryPolicy(maximumAttempts: .max, initialDelay: initialDelay, maximumDelay: maximumDelay)
        let jittered = backoff.delay(afterAttempt: max(1, failures), retryAfter: nil, randomUnit: randomUnit) ?? maximumDelay
        return max(jittered, min(serverDelay ?? .zero, maximumServerDelay))
    }
}
