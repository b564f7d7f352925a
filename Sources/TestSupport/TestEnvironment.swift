public import Foundation

/// Where the real PostgreSQL and memcached of the integration tests are.
///
/// Tests read the same variables as the service (`PROFILE_DATABASE_URL`, `PROFILE_MEMCACHED`)
/// with defaults that match `scripts/deps.sh`. A test that needs a server calls
/// ``requirePostgres()`` or ``requireMemcached()`` first: when the server is missing the test
/// fails with a message that says how to start it. It never skips.
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
    @discardableResult
    public static func deps(_ arguments: String...) throws -> Int32 {
        let process = Process()
        process.executableURL = repositoryRoot.appendingPathComponent("scripts/deps.sh")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
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
