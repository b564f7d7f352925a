import Crypto
import Foundation
import _CryptoExtras

/// One key of the pinned algorithm. The case fixes the algorithm: an HMAC secret can only check
/// HS256, a P-256 key only ES256, an RSA key only RS256.
enum VerificationKey: Sendable {
    case hmac(SymmetricKey)
    case p256(P256.Signing.PublicKey, keyID: String?)
    case rsa(_RSA.Signing.PublicKey, keyID: String?)

    static let minimumSecretBytes = 32

    var keyID: String? {
        switch self {
        case .hmac: nil
        case .p256(_, let keyID), .rsa(_, let keyID): keyID
        }
    }

    /// Checks a JWS signature over `signingInput` (`BASE64URL(header) '.' BASE64URL(payload)`).
    func isValidSignature(_ signature: [UInt8], for signingInput: some DataProtocol) -> Bool {
        switch self {
        case .hmac(let key):
            return HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signingInput, using: key)
        case .p256(let key, _):
            // RFC 7518 §3.4: R || S, 32 bytes each; not DER.
            guard signature.count == 64,
                let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
            else { return false }
            return key.isValidSignature(ecdsa, for: SHA256.hash(data: Array(signingInput)))
        case .rsa(let key, _):
            // RFC 7518 §3.3: RSASSA-PKCS1-v1_5 with SHA-256.
            return key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: SHA256.hash(data: Array(signingInput)),
                padding: .insecurePKCS1v1_5)
        }
    }

    // MARK: Loading

    static func load(
        _ source: AuthConfiguration.KeySource, for algorithm: AuthConfiguration.Algorithm
    ) throws(AuthConfigurationError) -> [VerificationKey] {
        switch (source, algorithm) {
        case (.secretFile(let path), .hs256):
            var secret = try read(path, what: "JWT secret file")
            if secret.last == UInt8(ascii: "\n") { secret.removeLast() }
            if secret.last == UInt8(ascii: "\r") { secret.removeLast() }
            guard secret.count >= minimumSecretBytes else {
                throw AuthConfigurationError(
                    "JWT secret file \(path) holds \(secret.count) bytes; HS256 needs at least \(minimumSecretBytes)")
            }
            return [.hmac(SymmetricKey(data: secret))]
        case (.secretFile, _):
            throw AuthConfigurationError("a JWT secret file works only with HS256, not \(algorithm.rawValue)")
        case (.publicKeyFile, .hs256), (.jwksFile, .hs256):
            throw AuthConfigurationError("HS256 needs a JWT secret file, not a public key or JWKS")
        case (.publicKeyFile(let path), _):
            let pem = String(decoding: try read(path, what: "JWT public key file"), as: UTF8.self)
            guard pem.contains("-----BEGIN PUBLIC KEY-----") || pem.contains("-----BEGIN RSA PUBLIC KEY-----") else {
                throw AuthConfigurationError("JWT public key file \(path) holds no PEM public key")
            }
            do {
                if algorithm == .es256 {
                    return [.p256(try P256.Signing.PublicKey(pemRepresentation: pem), keyID: nil)]
                }
                return [.rsa(try _RSA.Signing.PublicKey(pemRepresentation: pem), keyID: nil)]
            } catch {
                throw AuthConfigurationError(
                    "JWT public key file \(path) is not a \(algorithm == .es256 ? "P-256" : "RSA ≥ 2048-bit") public key"
                )
            }
        case (.jwksFile(let path), _):
            let data = try read(path, what: "JWKS file")
            let set: JSONWebKeySet
            do {
                set = try JSONDecoder().decode(JSONWebKeySet.self, from: Data(data))
            } catch {
                throw AuthConfigurationError("JWKS file \(path) is not a JSON Web Key Set")
            }
            let keys = set.keys.compactMap { key(from: $0, for: algorithm) }
            guard !keys.isEmpty else {
                throw AuthConfigurationError("JWKS file \(path) holds no usable \(algorithm.rawValue) key")
            }
            return keys
        }
    }

    /// A JWK of the pinned algorithm's type, or nil (a key for another algorithm is skipped, not trusted).
    private static func key(from jwk: JSONWebKeySet.Key, for algorithm: AuthConfiguration.Algorithm)
        -> VerificationKey?
    {
        if let declared = jwk.alg, declared != algorithm.rawValue { return nil }
        let keyID = jwk.kid
        switch algorithm {
        case .es256:
            guard jwk.kty == "EC", jwk.crv == "P-256",
                let x = jwk.x.flatMap({ Base64URL.decode(Substring($0)) }),
                let y = jwk.y.flatMap({ Base64URL.decode(Substring($0)) }), x.count == 32, y.count == 32,
                let key = try? P256.Signing.PublicKey(rawRepresentation: x + y)
            else { return nil }
            return .p256(key, keyID: keyID)
        case .rs256:
            guard jwk.kty == "RSA",
                let n = jwk.n.flatMap({ Base64URL.decode(Substring($0)) }),
                let e = jwk.e.flatMap({ Base64URL.decode(Substring($0)) }),
                let key = try? _RSA.Signing.PublicKey(n: n, e: e), key.keySizeInBits >= 2048
            else { return nil }
            return .rsa(key, keyID: keyID)
        case .hs256:
            return nil
        }
    }

    private static func read(_ path: String, what: String) throws(AuthConfigurationError) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw AuthConfigurationError("cannot read \(what) \(path)")
        }
        return Array(data)
    }
}
