import Foundation
import Glibc
import Logging
import MemcachedClient
import TestSupport

/// memcached nodes of a test's own, beside deps.sh's: another cache cluster on the same machine.
/// Each node runs in the foreground as a child process on a free loopback port and is stopped by
/// ``stop()`` (or when the value goes).
final class MemcachedNodes {
    private let processes: [Process]
    let ports: [Int]

    init(count: Int) throws {
        var processes: [Process] = []
        var ports: [Int] = []
        for _ in 0..<count {
            let port = TestEnvironment.freeLoopbackPort()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/memcached")
            // `-u`: memcached refuses to run as root without a user to drop to.
            process.arguments = ["-l", "127.0.0.1", "-p", String(port), "-U", "0", "-m", "16", "-t", "1"]
                + (getuid() == 0 ? ["-u", "memcache"] : [])
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            processes.append(process)
            ports.append(port)
        }
        self.processes = processes
        self.ports = ports
        for port in ports {
            guard Eventually.wait(timeout: .seconds(5), interval: .milliseconds(20), { TestEnvironment.isListening(port: port) })
            else {
                stop()
                throw TestEnvironment.MissingServer(description: "memcached on 127.0.0.1:\(port) did not start")
            }
        }
    }

    /// `host:port,host:port`, as `--memcached` takes it.
    var serverList: String { ports.map { "127.0.0.1:\($0)" }.joined(separator: ",") }

    /// A client of these nodes (the consistent hashing of the service's own).
    func connection() throws -> MemcachedConnection {
        try MemcachedConnection(
            configuration: try MemcachedConfiguration(servers: serverList), logger: Logger(label: "memcached-nodes"))
    }

    func stop() {
        // SIGKILL: a test thread may block SIGTERM, and the child inherits the mask.
        for process in processes where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}
