import Foundation
import Glibc
import ProfileAuth
import TestSupport

/// The built `profile-service` binary, run as a child process against the loopback servers.
final class ServiceProcess {
    /// `swift build` puts the executable beside the test bundle.
    static var executable: URL {
        let testBinary = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
        return testBinary.deletingLastPathComponent().appendingPathComponent("profile-service")
    }

    struct Finished {
        var status: Int32
        var standardError: String
    }

    /// Runs a subcommand to completion.
    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Finished {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let errorPipe = Pipe()
        process.standardError = errorPipe
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let data = errorPipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Finished(status: process.terminationStatus, standardError: String(decoding: data, as: UTF8.self))
    }

    let process = Process()
    let port: Int
    let logURL: URL

    /// The HS256 secret every test server is started with (`--jwt-secret-file`), made once per run.
    static let secretFile: String = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("profile-service-e2e-\(UUID()).secret")
        let secret = (0..<48).map { _ in UInt8.random(in: UInt8(ascii: "a")...UInt8(ascii: "z")) }
        _ = FileManager.default.createFile(atPath: url.path, contents: Data(secret), attributes: [.posixPermissions: 0o600])
        return url.path
    }()

    /// `Authorization` header with a token for `subject`, signed with ``secretFile``.
    static func bearer(_ subject: String, scope: String? = nil) -> [String: String] {
        let token = (try? TokenMinter(secretFile: secretFile))?.token(subject: subject, scope: scope) ?? ""
        return ["Authorization": "Bearer \(token)"]
    }

    /// Starts `serve` on a free port and waits until `/healthz` answers.
    /// - Parameter authArguments: how the server authenticates; by default tokens signed with ``secretFile``.
    init(extraArguments: [String] = [], authArguments: [String] = ["--jwt-secret-file", ServiceProcess.secretFile]) throws {
        port = Self.freePort()
        logURL = FileManager.default.temporaryDirectory.appendingPathComponent("profile-service-\(port).log")
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        process.executableURL = Self.executable
        process.arguments =
            [
                "serve", "--port", String(port), "--database-url", TestEnvironment.databaseURL,
                "--memcached", TestEnvironment.memcachedServerList, "--workers", "4",
            ] + authArguments + extraArguments
        process.standardError = try FileHandle(forWritingTo: logURL)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            if let response = try? Curl.request("http://127.0.0.1:\(port)/healthz"), response.status == 200 { return }
            guard process.isRunning else { break }
            usleep(100_000)
        }
        process.terminate()
        throw TestEnvironment.MissingServer(description: "profile-service did not start:\n\(log)")
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Headers for a profile write by its owner: JSON and the owner's bearer token.
    static func writeHeaders(for id: Int64) -> [String: String] {
        bearer(String(id)).merging(["Content-Type": "application/json"]) { $1 }
    }

    var log: String { (try? String(contentsOf: logURL, encoding: .utf8)) ?? "" }

    /// Sends SIGTERM and waits for the exit status.
    func terminate() -> Int32 {
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { process.terminate() }
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

/// curl, a real HTTP client, driven as a process.
enum Curl {
    struct Response {
        var status: Int
        var headers: [String: String]
        var body: String

        var json: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
        }
    }

    static func request(
        _ url: String, method: String = "GET", headers: [String: String] = [:], body: String? = nil
    ) throws -> Response {
        var arguments = ["-sS", "-i", "--max-time", "10", "-X", method, url]
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        if let body { arguments += ["--data-binary", body] }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CurlFailed(status: process.terminationStatus) }
        return parse(String(decoding: data, as: UTF8.self))
    }

    struct CurlFailed: Error { var status: Int32 }

    private static func parse(_ text: String) -> Response {
        // Skip interim responses (100 Continue) to the final one.
        var rest = Substring(text)
        while rest.hasPrefix("HTTP/1.1 1"), let end = rest.range(of: "\r\n\r\n") {
            rest = rest[end.upperBound...]
        }
        let parts = rest.components(separatedBy: "\r\n\r\n")
        let headLines = parts[0].components(separatedBy: "\r\n")
        let status = Int(headLines[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in headLines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Response(status: status, headers: headers, body: parts.dropFirst().joined(separator: "\r\n\r\n"))
    }
}
