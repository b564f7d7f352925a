import Logging
import MemcachedClient
import Testing
import TestSupport

/// Every test against the real memcached nodes of `scripts/deps.sh`, serialized: one of them
/// stops and restarts node 2.
@Suite(.serialized) enum LiveMemcachedTests {
    static let logger = Logger(label: "MemcachedClientTests")

    /// Both nodes, from `PROFILE_MEMCACHED` / `PROFILE_MC_PORTS`.
    static func configuration(retryTimeout: Duration = .seconds(2)) throws -> MemcachedConfiguration {
        try TestEnvironment.requireMemcached()
        return try MemcachedConfiguration(servers: TestEnvironment.memcachedServerList, retryTimeout: retryTimeout)
    }

    static func connection(retryTimeout: Duration = .seconds(2)) throws -> MemcachedConnection {
        try MemcachedConnection(configuration: configuration(retryTimeout: retryTimeout), logger: logger)
    }

    /// A key no other test or run uses.
    static func uniqueKey(_ name: String = #function) -> String {
        "mc-test:\(name.prefix(while: { $0 != "(" })):\(UInt64.random(in: 0...UInt64.max))"
    }
}
