public import ProfileAuth

/// Who may use the profile routes.
///
/// ```swift
/// let policy = ProfileAuthorization.required(try TokenVerifier(configuration: configuration), forReads: false)
/// ```
public enum ProfileAuthorization: Sendable {
    /// No checks at all (`--auth none`): anyone may write any profile. Development only.
    case disabled
    /// `PUT` needs a valid bearer token of the profile's owner or of an admin; `GET`/`HEAD` need a
    /// valid token of anyone when `forReads` is true, and nothing otherwise.
    case required(TokenVerifier, forReads: Bool)
}
