/// How ``TokenVerifier`` checks bearer tokens: one pinned algorithm, its key, and optional claims.
///
/// The algorithm is fixed here, never taken from a token: a token whose header names another
/// `alg` (including `none`) is refused, and each algorithm accepts only its own key type, so an
/// RSA or EC public key can never be used as an HMAC secret.
///
/// ```swift
/// let configuration = AuthConfiguration(key: .secretFile("/etc/profile-service/jwt-secret"), issuer: "idp")
/// let verifier = try TokenVerifier(configuration: configuration)
/// ```
public struct AuthConfiguration: Sendable {
    /// Where the verification key comes from.
    public enum KeySource: Sendable, Equatable {
        /// An HMAC secret: the file's bytes, one trailing newline removed. At least 32 bytes.
        case secretFile(String)
        /// A PEM `PUBLIC KEY` (SubjectPublicKeyInfo): P-256 for ES256, RSA ≥ 2048 bits for RS256.
        case publicKeyFile(String)
        /// A JSON Web Key Set (RFC 7517); keys of the pinned algorithm's type are used, chosen by `kid`.
        case jwksFile(String)
    }

    /// The only JWS algorithms accepted (RFC 7518 §3.1).
    public enum Algorithm: String, Sendable, CaseIterable {
        case hs256 = "HS256"
        case es256 = "ES256"
        case rs256 = "RS256"
    }

    public var key: KeySource
    public var algorithm: Algorithm
    /// When set, the token's `iss` must equal it.
    public var issuer: String?
    /// When set, the token's `aud` (a string or an array) must contain it.
    public var audience: String?
    /// Clock skew tolerated for `exp`, `nbf` and `iat`.
    public var leeway: Duration
    /// Longest a token may still be valid when it is presented (`exp` minus now, leeway aside): a
    /// token that claims to live longer (`exp: 1e300`) is refused, so a leaked one cannot outlive
    /// what the identity provider would issue.
    public var maximumLifetime: Duration

    /// The default ``maximumLifetime``: a day.
    public static let defaultMaximumLifetime: Duration = .seconds(86_400)

    public init(
        key: KeySource, algorithm: Algorithm = .hs256, issuer: String? = nil, audience: String? = nil,
        leeway: Duration = .seconds(30), maximumLifetime: Duration = AuthConfiguration.defaultMaximumLifetime
    ) {
        self.key = key
        self.algorithm = algorithm
        self.issuer = issuer
        self.audience = audience
        self.leeway = leeway
        self.maximumLifetime = maximumLifetime
    }
}
