import Foundation

/// How the tests authenticate to the service they start: JWT (HS256) with one secret per test
/// run, as in production, never `--auth none` unless a test is about that mode.
extension ServiceProcess {
    /// The HS256 secret file made once per test process (mode 600), for `--jwt-secret-file`.
    public static let jwtSecretFile: String = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("profile-service-test-\(UUID()).secret")
        let secret = (0..<48).map { _ in UInt8.random(in: UInt8(ascii: "a")...UInt8(ascii: "z")) }
        _ = FileManager.default.createFile(atPath: url.path, contents: Data(secret), attributes: [.posixPermissions: 0o600])
        return url.path
    }()

    /// The `serve` arguments that authenticate with ``jwtSecretFile``.
    public static var jwtArguments: [String] { ["--jwt-secret-file", jwtSecretFile] }

    /// A token for `subject` signed with ``jwtSecretFile``, minted by the binary's own
    /// `token` command.
    public static func token(subject: String, scope: String? = nil, ttlSeconds: Int = 3600) throws -> String {
        var arguments = ["token", "--sub", subject, "--ttl", String(ttlSeconds), "--jwt-secret-file", jwtSecretFile]
        if let scope { arguments += ["--scope", scope] }
        let finished = try run(arguments)
        guard finished.status == 0 else {
            throw TestEnvironment.MissingServer(description: "profile-service token failed: \(finished.standardError)")
        }
        return finished.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A scrape of this instance's `/metrics`: what it counted is the evidence of what it did.
    public func metrics() throws -> PrometheusText {
        let client = try HTTPTestClient(port: port)
        defer { client.close() }
        try client.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        let response = try client.readResponse()
        guard response.status == 200 else {
            throw TestEnvironment.MissingServer(description: "GET /metrics answered \(response.status)")
        }
        return PrometheusText(response.bodyText)
    }
}
