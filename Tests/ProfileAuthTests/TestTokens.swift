import Crypto
import Foundation
import _CryptoExtras

/// Builds compact JWS tokens by hand, so tests can produce every malformed or hostile variant.
enum TestTokens {
    static func base64URL(_ bytes: some DataProtocol) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func json(_ object: [String: Any]) -> Data {
        try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    static var now: Int { Int(Date().timeIntervalSince1970) }

    /// Claims of a token valid for an hour, for subject `sub`, overridden by `extra`.
    static func claims(sub: String = "42", _ extra: [String: Any] = [:]) -> [String: Any] {
        var claims: [String: Any] = ["sub": sub, "iat": now, "nbf": now, "exp": now + 3600]
        for (key, value) in extra { claims[key] = value }
        return claims
    }

    enum Signer {
        case hmac([UInt8])
        case p256(P256.Signing.PrivateKey)
        case rsa(_RSA.Signing.PrivateKey)
        case unsigned
    }

    static func token(
        alg: String, header extraHeader: [String: Any] = [:], claims: [String: Any], signer: Signer
    ) -> String {
        var header: [String: Any] = ["alg": alg, "typ": "JWT"]
        for (key, value) in extraHeader { header[key] = value }
        let input = base64URL(json(header)) + "." + base64URL(json(claims))
        let data = Data(input.utf8)
        let signature: [UInt8] =
            switch signer {
            case .hmac(let secret): Array(HMAC<SHA256>.authenticationCode(for: data, using: SymmetricKey(data: secret)))
            case .p256(let key): Array(try! key.signature(for: SHA256.hash(data: data)).rawRepresentation)
            case .rsa(let key):
                Array(try! key.signature(for: SHA256.hash(data: data), padding: .insecurePKCS1v1_5).rawRepresentation)
            case .unsigned: []
            }
        return input + "." + base64URL(signature)
    }

    /// A file in a fresh temporary folder.
    static func file(_ contents: some DataProtocol, name: String = "key") throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("profile-auth-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let url = folder.appendingPathComponent(name)
        try Data(contents).write(to: url)
        return url.path
    }
}
