import Foundation
import ProfileAuth
import TestSupport
import Testing

/// How the end-to-end tests authenticate: every service starts with TestSupport's one HS256
/// secret (``ServiceProcess/jwtSecretFile``), and tokens are minted with it in process.
extension ServiceProcess {
    /// `Authorization` header with a token for `subject`, signed with ``jwtSecretFile``.
    static func bearer(_ subject: String, scope: String? = nil) -> [String: String] {
        let token = (try? TokenMinter(secretFile: jwtSecretFile))?.token(subject: subject, scope: scope) ?? ""
        return ["Authorization": "Bearer \(token)"]
    }

    /// Headers for a profile write by its owner: JSON and the owner's bearer token.
    static func writeHeaders(for id: Int64) -> [String: String] {
        bearer(String(id)).merging(["Content-Type": "application/json"]) { $1 }
    }

    /// Creates profile `id` at version 1 through this instance, as its owner (a `PUT` with
    /// `If-None-Match: *`); records an issue unless it is answered 201.
    func createProfile(_ id: Int64, usernamePrefix: String, displayName: String = "First") throws {
        let created = try Curl.request(
            "\(baseURL)/users/profile/\(id)", method: "PUT",
            headers: Self.writeHeaders(for: id).merging(["If-None-Match": "*"]) { $1 },
            body: #"{"username":"\#(usernamePrefix)\#(id % 100_000_000)","display_name":"\#(displayName)"}"#)
        #expect(created.status == 201, "\(created.body)")
    }

    /// Starts `serve` and waits until it accepts connections.
    /// - Parameter authArguments: how the server authenticates; by default tokens signed with ``jwtSecretFile``.
    convenience init(extraArguments: [String] = [], authArguments: [String] = ServiceProcess.jwtArguments)
        throws
    {
        try self.init(arguments: authArguments + extraArguments)
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
        // `--head` for HEAD: with `-X HEAD` curl waits for the body Content-Length announces.
        var arguments = ["-sS", "-i", "--max-time", "10"] + (method == "HEAD" ? ["--head"] : ["-X", method]) + [url]
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        if let body { arguments += ["--data-binary", body] }
        let result = try TestProcess.run(URL(fileURLWithPath: "/usr/bin/curl"), arguments)
        guard result.status == 0 else { throw CurlFailed(status: result.status) }
        return parse(result.standardOutput)
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
