public import Foundation

/// The claims of a token that passed ``TokenVerifier/verify(authorizationHeader:)``.
public struct VerifiedToken: Sendable, Equatable {
    /// The scope that lets a token write any profile.
    public static let adminScope = "profiles:admin"

    /// The `sub` claim: for a user, the profile id in decimal.
    public var subject: String
    /// `scope` (space-separated, RFC 8693 §4.2) and `scopes` (array) together.
    public var scopes: Set<String>
    /// The `exp` claim: what the token opened (an event stream) ends then (leeway added).
    public var expiresAt: Date?

    public init(subject: String, scopes: Set<String> = [], expiresAt: Date? = nil) {
        self.subject = subject
        self.scopes = scopes
        self.expiresAt = expiresAt
    }

    /// True if the token may change profile `id`: its owner (`sub` equals `id` in decimal, with
    /// no sign or leading zeros) or a holder of ``adminScope``.
    public func mayWrite(profileID id: Int64) -> Bool {
        scopes.contains(Self.adminScope) || subject == String(id)
    }
}
