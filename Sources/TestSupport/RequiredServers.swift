public import Testing

/// A suite (or test) that talks to the real PostgreSQL or memcached of `scripts/deps.sh`.
///
/// Checked once before the suite runs: when a server is missing, the suite fails with one issue
/// that names the server and how to start it, and none of its tests run. A newcomer's
/// `swift test` with no servers then shows one clear failure per integration suite instead of a
/// connection error from every test in it. Nothing is skipped: a missing server is a failure,
/// in CI as anywhere.
///
///     @Suite(.requires(.postgres, .memcached))
///     struct ChangeFeedTests { … }
public struct RequiredServers: SuiteTrait, TestTrait, TestScoping {
    public enum Server: Sendable, CustomStringConvertible {
        case postgres
        case memcached

        public var description: String {
            switch self {
            case .postgres: "PostgreSQL"
            case .memcached: "memcached"
            }
        }
    }

    public let servers: [Server]

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        for server in servers {
            switch server {
            case .postgres: try TestEnvironment.requirePostgres()
            case .memcached: try TestEnvironment.requireMemcached()
            }
        }
        try await function()
    }
}

extension Trait where Self == RequiredServers {
    /// The suite needs these servers running (`scripts/deps.sh start`); see ``RequiredServers``.
    public static func requires(_ servers: RequiredServers.Server...) -> Self {
        RequiredServers(servers: servers)
    }
}
