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
    /// Sent as `Authorization: Bearer <token>`; `nil` sends no `Authorization` header.
    public var tokenProvider: TokenProvider?
    /// Whether ``ProfileClient/updates(for:)`` follows the service's event stream of the id, so
    /// changes committed anywhere (other devices, other instances, SQL) reach the observers.
    public var followsLiveUpdates = true

    public init(baseURL: URL, tokenProvider: TokenProvider? = nil) {
        self.baseURL = baseURL
        self.tokenProvider = tokenProvider
    }
}
