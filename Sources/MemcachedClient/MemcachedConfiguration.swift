internal import CLibMemcached
import ServiceRuntime

/// A memcached cluster and the client options used for it, as a libmemcached `memcached()`
/// configuration string.
///
/// ```swift
/// let configuration = try MemcachedConfiguration(servers: "10.0.0.1:11211,10.0.0.2:11211")
/// // --SERVER=10.0.0.1:11211 --SERVER=10.0.0.2:11211 --DISTRIBUTION=consistent --TCP-NODELAY
/// // --SUPPORT-CAS --CONNECT-TIMEOUT=100 --POLL-TIMEOUT=100 --RETRY-TIMEOUT=2
/// ```
///
/// Always the ASCII protocol (the binary one is deprecated by memcached and reports `add` on an
/// existing key differently), consistent hashing so a node's keys stay on it, `TCP_NODELAY`, and
/// CAS support so every get is a `gets`. `REMOVE_FAILED_SERVERS` is never enabled: it would move a
/// dead node's keys to the others and bring them back stale when it returns. Instead a node that
/// fails is put in timeout: libmemcached's `MEMCACHED_BEHAVIOR_RETRY_TIMEOUT` "When enabled a host
/// which is problematic will only be checked for usage based on the amount of time set by this
/// behavior. The value is in seconds."
///
/// Related libmemcached documentation:
/// <https://awesomized.github.io/libmemcached/libmemcached/configuration.html>,
/// <https://awesomized.github.io/libmemcached/libmemcached/memcached_behavior.html>
public struct MemcachedConfiguration: Sendable {
    /// The nodes, in the order of the list.
    public let servers: [MemcachedServer]
    /// Connect timeout, in milliseconds in the configuration string.
    public let connectTimeout: Duration
    /// Poll timeout for each read or write, in milliseconds in the configuration string.
    public let pollTimeout: Duration
    /// How long a failed node is skipped before it is tried again, whole seconds (rounded up).
    public let retryTimeout: Duration
    /// Consecutive failures before libmemcached reports the node as dead
    /// (`MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT`). libmemcached 1.1.4's configuration language has
    /// no `--SERVER-FAILURE-LIMIT` (its parser answers `UNKNOWN_OPTION` although the manual lists
    /// it), so ``MemcachedConnection`` sets it with `memcached_behavior_set` after `memcached()`.
    public let serverFailureLimit: Int

    /// Parses a server list and checks the resulting configuration with
    /// `libmemcached_check_configuration`.
    ///
    /// - Parameters:
    ///   - servers: `host:port` entries separated by commas, e.g. `"127.0.0.1:11211,127.0.0.1:11212"`.
    ///     Ports are required (1...65535), hosts non-empty, no entry twice. No IPv6 addresses:
    ///     libmemcached 1.1.4's configuration parser rejects them.
    ///   - connectTimeout: at least 1 ms. Default 100 ms (libmemcached's own is 4 s).
    ///   - pollTimeout: at least 1 ms. Default 100 ms (libmemcached's own is 5 s).
    ///   - retryTimeout: at least 1 s. Default 2 s.
    ///   - serverFailureLimit: at least 1. Default 2.
    /// - Throws: ``MemcachedError`` with code ``MemcachedError/Code/invalidConfiguration`` and a
    ///   one-line message naming the bad entry or option.
    public init(
        servers: String,
        connectTimeout: Duration = .milliseconds(100),
        pollTimeout: Duration = .milliseconds(100),
        retryTimeout: Duration = .seconds(2),
        serverFailureLimit: Int = 2
    ) throws {
        self.servers = try Self.parse(servers)
        guard connectTimeout.milliseconds >= 1 else {
            throw MemcachedError.invalidConfiguration("connectTimeout must be at least 1 ms, got \(connectTimeout)")
        }
        guard pollTimeout.milliseconds >= 1 else {
            throw MemcachedError.invalidConfiguration("pollTimeout must be at least 1 ms, got \(pollTimeout)")
        }
        guard retryTimeout >= .seconds(1) else {
            throw MemcachedError.invalidConfiguration("retryTimeout must be at least 1 s, got \(retryTimeout)")
        }
        guard serverFailureLimit >= 1 else {
            throw MemcachedError.invalidConfiguration(
                "serverFailureLimit must be at least 1, got \(serverFailureLimit)")
        }
        self.connectTimeout = connectTimeout
        self.pollTimeout = pollTimeout
        self.retryTimeout = retryTimeout
        self.serverFailureLimit = serverFailureLimit
        // Check each server alone first so that the message names the entry the parser rejects
        // (libmemcached 1.1.4 takes no one-letter host names such as "a", nor IPv6 addresses).
        for server in self.servers {
            try Self.check(
                Self.configurationString(servers: [server], options: ""), subject: "memcached server '\(server)'")
        }
        try Self.check(configurationString, subject: "'\(configurationString)'")
    }

    /// The `memcached()` configuration string for the whole cluster.
    public var configurationString: String {
        Self.configurationString(servers: servers, options: optionsString)
    }

    /// The same options for a single node (used for per-node `flush_all` and `stats`).
    func configurationString(for server: MemcachedServer) -> String {
        Self.configurationString(servers: [server], options: optionsString)
    }

    private var optionsString: String {
        [
            "--DISTRIBUTION=consistent",
            "--TCP-NODELAY",
            "--SUPPORT-CAS",
            "--CONNECT-TIMEOUT=\(connectTimeout.milliseconds)",
            "--POLL-TIMEOUT=\(pollTimeout.milliseconds)",
            "--RETRY-TIMEOUT=\(Self.wholeSecondsRoundedUp(retryTimeout))",
        ].joined(separator: " ")
    }

    private static func configurationString(servers: [MemcachedServer], options: String) -> String {
        (servers.map { "--SERVER=\($0.host):\($0.port)" } + [options]).filter { !$0.isEmpty }
            .joined(separator: " ")
    }

    private static func wholeSecondsRoundedUp(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return attoseconds > 0 ? seconds + 1 : seconds
    }

    private static func parse(_ list: String) throws -> [MemcachedServer] {
        guard list.contains(where: { !$0.isWhitespace }) else {
            throw MemcachedError.invalidConfiguration("empty memcached server list")
        }
        var servers: [MemcachedServer] = []
        for rawEntry in list.split(separator: ",", omittingEmptySubsequences: false) {
            let entry = rawEntry.trimmingWhitespace()
            guard !entry.isEmpty else {
                throw MemcachedError.invalidConfiguration("empty entry in memcached server list '\(list)'")
            }
            guard let colon = entry.lastIndex(of: ":") else {
                throw MemcachedError.invalidConfiguration("memcached server '\(entry)' has no port (expected host:port)")
            }
            let host = entry[..<colon]
            let portText = entry[entry.index(after: colon)...]
            guard !host.contains(":"), !host.contains("[") else {
                // libmemcached 1.1.4's configuration parser accepts no IPv6 address, bracketed or not.
                throw MemcachedError.invalidConfiguration(
                    "memcached server '\(entry)': IPv6 addresses are not supported; use a host name or IPv4 address")
            }
            guard !host.isEmpty, !host.contains(where: { $0.isWhitespace }) else {
                throw MemcachedError.invalidConfiguration("memcached server '\(entry)' has an empty or invalid host")
            }
            guard portText.allSatisfy(\.isASCIIDigit), let port = Int(portText), (1...65535).contains(port) else {
                throw MemcachedError.invalidConfiguration(
                    "memcached server '\(entry)' has an invalid port '\(portText)' (expected 1...65535)")
            }
            let server = MemcachedServer(host: String(host), port: port)
            guard !servers.contains(server) else {
                throw MemcachedError.invalidConfiguration("memcached server '\(entry)' is listed twice")
            }
            servers.append(server)
        }
        return servers
    }

    /// `libmemcached_check_configuration` parses the string as `memcached()` would and writes
    /// the parser's message into `error_buffer`.
    private static func check(_ configuration: String, subject: String) throws {
        var buffer = [CChar](repeating: 0, count: 512)
        let rc = configuration.withCString { string in
            libmemcached_check_configuration(string, configuration.utf8.count, &buffer, buffer.count)
        }
        guard rc == MEMCACHED_SUCCESS else {
            let detail = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw MemcachedError(
                code: .invalidConfiguration,
                message: "libmemcached rejected \(subject): \(detail)",
                returnCode: Int32(rc.rawValue))
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        guard let first = firstIndex(where: { !$0.isWhitespace }) else { return self[endIndex...] }
        let last = lastIndex(where: { !$0.isWhitespace })!
        return self[first...last]
    }
}
