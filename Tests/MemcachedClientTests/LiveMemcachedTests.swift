import Foundation
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
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("scripts/deps.sh").path
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        // Glibc's posix_spawn_file_actions_addclosefrom_np is not visible to Swift: bash closes them.
        let closeAbove2 = #"for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done 2>/dev/null"#
        let argv = (["/bin/bash", "-c", closeAbove2 + #"; exec "$0" "$@""#, script] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, &attributes, argv, environ)
        guard spawned == 0 else { throw SpawnError(description: "posix_spawn /bin/bash \(script): \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status >> 8) & 0xFF
    }
}

struct SpawnError: Error, CustomStringConvertible {
    let description: String
}
