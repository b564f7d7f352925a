import Foundation

/// Verifies `Authorization: Bearer <JWT>` headers synchronously, on the caller's thread.
///
/// Built on swift-crypto (HMAC-SHA256, P-256 ECDSA, RSASSA-PKCS1-v1_5) rather than jwt-kit: jwt-kit 5
/// verifies only through `JWTKeyCollection`, an actor with `async` methods, with its signers
/// internal, and the service verifies on its fixed worker threads, which must not wait on the
/// Swift concurrency pool (README, "Architecture"). What jwt-kit would add beyond the signatures — the
/// registered claims and the JWK model — is small and lives in `TokenClaims.swift`.
///
/// ```swift
/// let verifier = try TokenVerifier(configuration: AuthConfiguration(key: .secretFile(path)))
/// let token = try verifier.verify(authorizationHeader: request.headers["Authorization"])
/// guard token.mayWrite(profileID: id) else { … 403 … }
/// ```
public struct TokenVerifier: Sendable {
    /// Longest token accepted; real ones are well under 2 KiB.
    public static let maximumTokenBytes = 8192

    public let configuration: AuthConfiguration
    private let keys: [VerificationKey]
    private let now: @Sendable () -> Date
    private let verified = VerifiedClaimsCache()

    /// Loads the key once.
    /// - Throws: ``AuthConfigurationError`` for an unreadable file, a key of the wrong type or size,
    ///   or a JWKS without a usable key.
    public init(configuration: AuthConfiguration) throws(AuthConfigurationError) {
        try self.init(configuration: configuration, now: { Date() })
    }

    init(configuration: AuthConfiguration, now: @escaping @Sendable () -> Date) throws(AuthConfigurationError) {
        self.configuration = configuration
        self.keys = try VerificationKey.load(configuration.key, for: configuration.algorithm)
        self.now = now
    }

    /// Verifies the value of an `Authorization` header.
    /// - Parameter authorizationHeader: the header value, or nil when absent.
    /// - Returns: the subject and scopes of a token that verifies.
    /// - Throws: ``AuthError/missing`` without a header, ``AuthError/malformed`` when it is not
    ///   `Bearer` and a compact JWS, ``AuthError/invalid(_:)`` when a check fails.
    public func verify(authorizationHeader: String?) throws(AuthError) -> VerifiedToken {
        guard let authorizationHeader else { throw .missing }
        return try verify(token: try Self.bearerToken(authorizationHeader))
    }

    /// Verifies a compact JWS (RFC 7515 §7.1): pinned `alg`, signature, then claims.
    public func verify(token: Substring) throws(AuthError) -> VerifiedToken {
        guard token.utf8.count <= Self.maximumTokenBytes else { throw .malformed }
        if let known = verified.verified(token) { return try check(known.claims, scopes: known.scopes) }
        let claims = try verifySignature(of: token)
        let scopes = Self.scopes(of: claims)
        let result = try check(claims, scopes: scopes)
        verified.insert(.init(claims: claims, scopes: scopes), of: token)
        return result
    }

    /// Pinned `alg`, key, signature; returns the decoded claims, not yet checked.
    private func verifySignature(of token: Substring) throws(AuthError) -> TokenClaims {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }),
            let headerBytes = Base64URL.decode(parts[0]),
            let signature = Base64URL.decode(parts[2]),
            let header = try? JSONDecoder().decode(TokenHeader.self, from: Data(headerBytes))
        else { throw .malformed }

        guard header.alg == configuration.algorithm.rawValue else { throw .invalid(.algorithm) }
        guard header.crit == nil else { throw .invalid(.criticalHeader) }
        var candidates = keys
        if let keyID = header.kid, keys.contains(where: { $0.keyID != nil }) {
            candidates = keys.filter { $0.keyID == keyID }
        }
        guard !candidates.isEmpty else { throw .invalid(.unknownKey) }
        let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard candidates.contains(where: { $0.isValidSignature(signature, for: signingInput) }) else {
            throw .invalid(.signature)
        }

        guard let payload = Base64URL.decode(parts[1]),
            let claims = try? JSONDecoder().decode(TokenClaims.self, from: Data(payload))
        else { throw .invalid(.claims) }
        return claims
    }

    /// `scope` (space-separated, RFC 8693 §4.2) and `scopes` (an array) together.
    private static func scopes(of claims: TokenClaims) -> Set<String> {
        var scopes = Set(claims.scopes ?? [])
        if let scope = claims.scope { scopes.formUnion(scope.split(separator: " ").map(String.init)) }
        return scopes
    }

    private func check(_ claims: TokenClaims, scopes: Set<String>) throws(AuthError) -> VerifiedToken {
        let now = self.now()
        let leeway = TimeInterval(configuration.leeway.components.seconds)
        guard let exp = claims.exp else { throw .invalid(.missingExpiry) }
        guard now.timeIntervalSince(exp.value) < leeway else { throw .invalid(.expired) }
        let maximumLifetime = TimeInterval(configuration.maximumLifetime.components.seconds)
        guard exp.value.timeIntervalSince(now) <= maximumLifetime + leeway else { throw .invalid(.lifetimeTooLong) }
        if let nbf = claims.nbf, nbf.value.timeIntervalSince(now) > leeway { throw .invalid(.notYetValid) }
        if let iat = claims.iat, iat.value.timeIntervalSince(now) > leeway { throw .invalid(.issuedInFuture) }
        if let issuer = configuration.issuer, claims.iss != issuer { throw .invalid(.issuer) }
        if let audience = configuration.audience, claims.aud?.value.contains(audience) != true {
            throw .invalid(.audience)
        }
        guard let subject = claims.sub, !subject.isEmpty else { throw .invalid(.missingSubject) }
        return VerifiedToken(subject: subject, scopes: scopes, expiresAt: exp.value)
    }

    /// `Bearer <token68>` (RFC 6750 §2.1); the scheme is case-insensitive (RFC 9110 §11.1).
    static func bearerToken(_ header: String) throws(AuthError) -> Substring {
        // On the UTF-8 bytes: this runs for every authenticated request (twice for a PUT), and
        // Character-wise scanning was most of its cost. Only ASCII is compared, so byte offsets
        // are Character boundaries.
        let bytes = header.utf8
        var start = bytes.startIndex
        while start < bytes.endIndex, bytes[start] == UInt8(ascii: " ") { start = bytes.index(after: start) }
        guard let space = bytes[start...].firstIndex(of: UInt8(ascii: " ")),
            Self.isBearerScheme(bytes[start..<space])
        else { throw .malformed }
        var tokenStart = bytes.index(after: space)
        while tokenStart < bytes.endIndex, bytes[tokenStart] == UInt8(ascii: " ") { tokenStart = bytes.index(after: tokenStart) }
        var tokenEnd = bytes.endIndex
        while tokenEnd > tokenStart {
            let last = bytes[bytes.index(before: tokenEnd)]
            guard last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") else { break }
            tokenEnd = bytes.index(before: tokenEnd)
        }
        let value = bytes[tokenStart..<tokenEnd]
        guard !value.isEmpty,
            !value.contains(where: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: ",") })
        else { throw .malformed }
        return header[tokenStart..<tokenEnd]
    }

    /// `Bearer`, in any case (RFC 9110 §11.1: the scheme is case-insensitive).
    private static func isBearerScheme(_ scheme: Substring.UTF8View) -> Bool {
        scheme.count == 6 && zip(scheme, "bearer".utf8).allSatisfy { $0 | 0x20 == $1 }
    }
}
