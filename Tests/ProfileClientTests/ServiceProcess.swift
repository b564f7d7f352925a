import Foundation
import Glibc
import Synchronization
import TestSupport

/// The built `profile-service` binary, run as a child process against the loopback servers
/// (after `Tests/EndToEndTests/ServiceProcess.swift`, plus a fixed port for restarts and the
/// authentication arguments of ``ServiceAuthentication``).
final class ServiceProcess: Sendable {
    /// `swift build` puts the executable beside the test bundle.
    static var executable: URL {
        let testBinary = URL(
            fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0])
        return testBinary.deletingLastPathComponent().appendingPathComponent("profile-service")
    }

    private let process: Mutex<Process>
    let port: Int
    let logURL: URL

    /// Starts `serve` on `port` (a free one by default) and waits until it accepts connections.
    init(port: Int? = nil) throws {
        self.port = port ?? Self.freePort()
        logURL = FileManager.default.temporaryDirectory.appendingPathComponent("profile-client-\(self.port).log")
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        let process = Process()
        process.executableURL = Self.executable
        process.arguments =
            [
                "serve", "--port", String(self.port), "--database-url", TestEnvironment.databaseURL,
                "--memcached", TestEnvironment.memcachedServerList, "--workers", "4",
            ] + ServiceAuthentication.shared.serveArguments
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

    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    var log: String { (try? String(contentsOf: logURL, encoding: .utf8)) ?? "" }

    /// Sends SIGTERM and waits for the exit status.
    @discardableResult
    func terminate() -> Int32 {
        process.withLock { process in
            if process.isRunning { kill(process.processIdentifier, SIGTERM) }
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

    private static func freePort() -> Int {
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
}

/// How the tests authenticate to the service, whichever version of it is built: before JWT
/// authentication exists (`serve --help` has no `--auth`) nothing; with `--auth none`, that; with
/// only JWT, a secret file and tokens minted by `profile-service token --sub ID --jwt-secret-file F`.
struct ServiceAuthentication: Sendable {
    static let shared = ServiceAuthentication.detect()

    var serveArguments: [String]
    private var secretFile: String?

    static func detect() -> ServiceAuthentication {
        let help = (try? run(["serve", "--help"])) ?? ""
        guard help.contains("--auth") else { return ServiceAuthentication(serveArguments: []) }
        if help.range(of: #"\bnone\b"#, options: .regularExpression) != nil {
            return ServiceAuthentication(serveArguments: ["--auth", "none"])
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("profile-client-jwt-\(getpid())").path
        let secret = (0..<48).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        _ = FileManager.default.createFile(atPath: path, contents: Data(secret.utf8), attributes: [.posixPermissions: 0o600])
        return ServiceAuthentication(
            serveArguments: ["--auth", "jwt", "--jwt-secret-file", path], secretFile: path)
    }

    /// A bearer token for the profile `id`, or `nil` when the service needs none.
    func token(for id: Int64) throws -> String? {
        guard let secretFile else { return nil }
        return try Self.run(["token", "--sub", String(id), "--jwt-secret-file", secretFile])
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = ServiceProcess.executable
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
