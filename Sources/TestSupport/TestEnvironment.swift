public import Foundation

/// Where the real PostgreSQL and memcached of the integration tests are.
///
/// Tests read the same variables as the service (`PROFILE_DATABASE_URL`, `PROFILE_MEMCACHED`)
/// with defaults that match `scripts/deps.sh`. A suite that needs a server is marked
/// `.requires(.postgres, .memcached)` (``RequiredServers``), and helpers that connect call
/// ``requirePostgres()`` or ``requireMemcached()`` first: when the server is missing the suite or
/// test fails with a message that says how to start it. It never skips.
public enum TestEnvironment {
    /// The repository root (the folder holding `Package.swift`).
    public static let repositoryRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
                return url
            }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    public static func variable(_ name: String) -> String? {
        ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }

    public static var postgresPort: Int { Int(variable("PROFILE_PG_PORT") ?? "") ?? 55432 }

    public static var databaseURL: String {
        variable("PROFILE_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:\(postgresPort)/profiles"
    }

    /// `host:port` of each memcached node, in the order of `PROFILE_MEMCACHED`.
    public static var memcachedServers: [(host: String, port: Int)] {
        let list =
            variable("PROFILE_MEMCACHED")
            ?? (variable("PROFILE_MC_PORTS") ?? "21211,21212").split(separator: ",").map { "127.0.0.1:\($0)" }
            .joined(separator: ",")
        return list.split(separator: ",").map { entry in
            let parts = entry.split(separator: ":")
            return (String(parts[0]), Int(parts[1]) ?? 11211)
        }
    }

    public static var memcachedServerList: String {
        memcachedServers.map { "\($0.host):\($0.port)" }.joined(separator: ",")
    }

    /// Runs `scripts/deps.sh` with the given arguments (for tests that stop and restart servers)
    /// and returns its exit status.
    ///
    /// Spawned with a clean signal mask and default dispositions (a test thread may block
    /// SIGTERM, and a memcached started with it blocked would ignore `deps.sh stop`), through a
    /// shell that closes every descriptor above 2: a server the script starts would otherwise
    /// inherit this process's pipes or sockets and keep a waiting `Process` from ever returning.
    ///
    /// - Parameter environment: settings added to this process's for the script (a server of a
    ///   test's own: `PROFILE_STATE_DIR`, `PROFILE_PG_PORT`, …).
    @discardableResult
    public static func deps(_ arguments: String..., environment: [String: String] = [:]) throws -> Int32 {
        try script("scripts/deps.sh", arguments, environment: environment)
    }

    /// Runs one of the repository's scripts (`scripts/delay.sh`, …) as ``deps(_:environment:)``
    /// runs `scripts/deps.sh`: its output to /dev/null, its standard error to this process's.
    @discardableResult
    public static func script(_ relativePath: String, _ arguments: [String], environment: [String: String] = [:])
        throws -> Int32
    {
        let path = repositoryRoot.appendingPathComponent(relativePath).path
        let script = #"for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done 2>/dev/null; exec "$0" "$@""#
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
        let settings = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let words = ["/usr/bin/env"] + settings + ["/bin/bash", "-c", script, path] + arguments
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/usr/bin/env", &actions, &attributes, argv, environ)
        guard spawned == 0 else { throw MissingServer(description: "cannot run \(relativePath): errno \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// Whether something accepts TCP connections on 127.0.0.1 (or `host`) at `port`.
    public static func isListening(host: String = "127.0.0.1", port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// A TCP port that was free on 127.0.0.1 a moment ago (the kernel's pick for port 0).
    public static func freeLoopbackPort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length)
                return getsockname(fd, pointer, &length)
            }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    public struct MissingServer: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) {
            self.description = description
        }
    }

    /// Throws (failing the test) unless PostgreSQL answers on its port.
    public static func requirePostgres() throws {
        guard isListening(port: postgresPort) || variable("PROFILE_DATABASE_URL") != nil else {
            throw MissingServer(
                description: "PostgreSQL is not listening on 127.0.0.1:\(postgresPort); run scripts/deps.sh start")
        }
    }

    /// Throws (failing the test) unless every memcached node answers.
    public static func requireMemcached() throws {
        for server in memcachedServers where !isListening(host: server.host, port: server.port) {
            throw MissingServer(
                description: "memcached is not listening on \(server.host):\(server.port); run scripts/deps.sh start")
        }
    }
}
