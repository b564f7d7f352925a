public import Foundation
import Glibc
import Synchronization

/// The built `profile-service` binary, run as a child process against the loopback servers of
/// scripts/deps.sh, and stopped with SIGTERM.
public final class ServiceProcess: Sendable {
    /// `swift build` puts the executable beside the test bundle.
    public static var executable: URL {
        let testBinary = URL(
            fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0])
        return testBinary.deletingLastPathComponent().appendingPathComponent("profile-service")
    }

    /// Runs a subcommand (`migrate`, `token`, `serve --help`, …) to completion.
    public static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> TestProcess.Finished {
        try TestProcess.run(executable, arguments, environment: environment)
    }

    private let process: Mutex<Process>
    public let port: Int
    public let logURL: URL

    /// Starts `serve` on `port` (a free one by default) with the test servers, four workers and
    /// `arguments`, and waits until it accepts connections.
    public init(port: Int? = nil, arguments: [String]) throws {
        self.port = port ?? TestEnvironment.freeLoopbackPort()
        logURL = FileManager.default.temporaryDirectory.appendingPathComponent("profile-service-\(self.port)-\(UUID()).log")
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        let process = Process()
        process.executableURL = Self.executable
        process.arguments =
            [
                "serve", "--port", String(self.port), "--database-url", TestEnvironment.databaseURL,
                "--memcached", TestEnvironment.memcachedServerList,
            ] + arguments
        process.standardError = try FileHandle(forWritingTo: logURL)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        self.process = Mutex(process)
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            if TestEnvironment.isListening(port: self.port) { return }
            guard process.isRunning else { break }
            usleep(50_000)
        }
        process.terminate()
        throw TestEnvironment.MissingServer(description: "profile-service did not start:\n\(log)")
    }

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Everything the service wrote to stderr so far (its log lines).
    public var log: String { (try? String(contentsOf: logURL, encoding: .utf8)) ?? "" }

    /// The log once `predicate` holds for it, or as it is after `timeout`: the service writes its
    /// lines from a thread of its own a few milliseconds after the event (docs/design.md §6).
    public func log(waitingUntil predicate: (String) -> Bool, timeout: Duration = .seconds(5)) -> String {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        while true {
            let text = log
            if predicate(text) || ContinuousClock.now >= deadline { return text }
            usleep(5_000)
        }
    }

    public var processIdentifier: pid_t { process.withLock { $0.processIdentifier } }

    /// Sends SIGTERM (if it still runs) and waits for the exit status.
    @discardableResult
    public func terminate() -> Int32 {
        process.withLock { process in
            if process.isRunning { kill(process.processIdentifier, SIGTERM) }
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    /// Waits for the process to exit by itself and returns its status.
    public func waitUntilExit() -> Int32 {
        process.withLock { process in
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    deinit {
        process.withLock { process in
            if process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
        }
    }
}
