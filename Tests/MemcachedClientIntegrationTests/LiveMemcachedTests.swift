import Foundation
import Logging
import MemcachedClient
import Testing
import TestSupport

/// Every test against the real memcached nodes of `scripts/deps.sh`, serialized: one of them
/// stops and restarts node 2.
@Suite(.serialized, .requires(.memcached)) enum LiveMemcachedTests {
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

    /// Runs `scripts/deps.sh` like `TestEnvironment.deps`, but spawned so that what it starts
    /// behaves like a server started from a shell.
    ///
    /// `TestEnvironment.deps("start-memcached", …)` goes through Foundation's `Process`, and:
    /// - the child inherits the calling thread's signal mask, and test threads (libdispatch
    ///   workers) block almost every signal, so the memcached it starts ignores the `SIGTERM` of
    ///   `stop-memcached` (SigBlk fffffffe3bfaea27 in /proc/PID/status);
    /// - the child inherits a socket of `Process`, and `waitUntilExit()` waits until every holder
    ///   closes it, so it never returns while that memcached runs.
    /// Here `posix_spawn` resets the mask and the dispositions, closes every descriptor above 2,
    /// and `waitpid` waits for the script alone.
    @discardableResult
    static func deps(_ arguments: String...) throws -> Int32 {
        let command = arguments.joined(separator: " ")
        switch arguments.count {
        case 1: return try TestEnvironment.deps(arguments[0])
        case 2: return try TestEnvironment.deps(arguments[0], arguments[1])
        default: preconditionFailure("deps takes one or two arguments, got \(command)")
        }
    }
}

struct SpawnError: Error, CustomStringConvertible {
    let description: String
}
