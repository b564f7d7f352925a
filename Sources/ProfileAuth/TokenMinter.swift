import Crypto
public import Foundation

/// Mints HS256 tokens: for `profile-service token`, development and tests. Not used by the server.
public struct TokenMinter: Sendable {
    private let key: SymmetricKey

    /// - Throws: ``AuthConfigurationError`` when the file is unreadable or shorter than 32 bytes.
    public init(secretFile path: String) throws(AuthConfigurationError) {
        guard case .hmac(let key) = try VerificationKey.load(.secretFile(path), for: .hs256).first else {
            throw AuthConfigurationError("cannot read JWT secret file \(path)")
        }
        self.key = key
    }

    /// - Parameters:
    ///   - subject: `sub`, usually a profile id in decimal.
    ///   - lifetime: `exp` is now plus this.
    ///   - scope: space-separated scopes, such as ``VerifiedToken/adminScope``.
    ///   - issuer, audience: `iss` and `aud` when the server checks them.
    ///   - now: the issue time (`iat`, `nbf`).
    public func token(
        subject: String, lifetime: Duration = .seconds(3600), scope: String? = nil, issuer: String? = nil,
        audience: String? = nil, now: Date = Date()
    ) -> String {
        let now = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))  // NumericDate as integer
        let expiry = now.addingTimeInterval(TimeInterval(lifetime.components.seconds))
        let claims = TokenClaims(
            sub: subject, exp: NumericDate(expiry), nbf: NumericDate(now), iat: NumericDate(now),
            iss: issuer, aud: audience.map { Audience([$0]) },
            scope: scope, scopes: nil)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let payload = (try? encoder.encode(claims)) ?? Data("{}".utf8)
        let signingInput = Base64URL.encode(Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8)) + "." + Base64URL.encode(payload)
        let mac = HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: key)
        return signingInput + "." + Base64URL.encode(Data(mac))
    }
}
