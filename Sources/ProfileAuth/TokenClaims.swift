import Foundation
import JWTKit

/// The registered claims the service reads (RFC 7519 §4.1), decoded with jwt-kit's claim types,
/// plus the two common spellings of OAuth scopes.
struct TokenClaims: JWTPayload {
    var sub: SubjectClaim?
    var exp: ExpirationClaim?
    var nbf: NotBeforeClaim?
    var iat: IssuedAtClaim?
    var iss: IssuerClaim?
    var aud: AudienceClaim?
    /// RFC 8693 §4.2: space-separated.
    var scope: String?
    /// The array form some identity providers issue.
    var scopes: [String]?

    /// jwt-kit's async hook; never called, because ``TokenVerifier`` checks the claims itself,
    /// synchronously and with leeway.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// The protected header fields that matter for verification (RFC 7515 §4.1).
struct TokenHeader: Decodable {
    var alg: String
    var kid: String?
    var crit: [String]?
}
