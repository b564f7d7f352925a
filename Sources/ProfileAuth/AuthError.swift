/// Why a request carries no usable bearer token. Messages never repeat the token.
///
/// All three map to HTTP 401; ``missing`` is answered without `error=` in `WWW-Authenticate`,
/// the others with `error="invalid_token"` (RFC 6750 §3.1).
public enum AuthError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No `Authorization` header.
    case missing
    /// An `Authorization` header that is not `Bearer <compact JWS>`.
    case malformed
    /// A well-formed token that does not verify.
    case invalid(Reason)

    /// Which check an otherwise well-formed token failed.
    public enum Reason: String, Sendable, Equatable {
        case algorithm = "the token's algorithm is not the configured one"
        case unknownKey = "no configured key matches the token"
        case signature = "the token's signature does not verify"
        case claims = "the token's claims are malformed"
        case expired = "the token has expired"
        case lifetimeTooLong = "the token's expiry is further away than this service accepts"
        case missingExpiry = "the token has no expiry (exp)"
        case notYetValid = "the token is not valid yet"
        case issuedInFuture = "the token was issued in the future"
        case issuer = "the token's issuer is not accepted"
        case audience = "the token's audience is not this service"
        case missingSubject = "the token has no subject (sub)"
        case criticalHeader = "the token requires unsupported extensions (crit)"
    }

    public var description: String {
        switch self {
        case .missing: "send Authorization: Bearer <token>"
        case .malformed: "the Authorization header is not a bearer token"
        case .invalid(let reason): reason.rawValue
        }
    }
}

/// Why a key configuration cannot be used; reported at start-up.
public struct AuthConfigurationError: Error, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
