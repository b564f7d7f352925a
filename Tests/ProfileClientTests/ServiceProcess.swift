import Foundation
import Glibc
import Synchronization
import TestSupport

extension ServiceProcess {
    /// Starts `serve` on `port` (a free one by default) with ``ServiceAuthentication``'s arguments.
    convenience init(port: Int? = nil) throws {
        try self.init(port: port, arguments: ServiceAuthentication.shared.serveArguments)
    }

    var url: URL { URL(string: baseURL)! }
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
        try ServiceProcess.run(arguments).standardOutput
    }
}
