/// The source of truth for profiles (PostgreSQL in production).
///
/// One value per worker thread: implementations hold a connection that is not thread-safe.
public protocol ProfileStore {
    /// The profile with this id, or `nil`.
    func profile(id: Int64) throws(ProfileStoreError) -> Profile?
    /// Sets the display name if the stored version is `expectedVersion`, bumping the version.
    func updateDisplayName(id: Int64, to displayName: String, expectedVersion: Int32) throws(ProfileStoreError)
        -> ProfileUpdateOutcome
    /// Inserts a new profile at version 1.
    func create(id: Int64, username: String, displayName: String) throws(ProfileStoreError) -> Profile
    /// Whether the store answers now (readiness).
    func isHealthy() -> Bool
}

public enum ProfileUpdateOutcome: Sendable, Equatable {
    case updated(Profile)
    /// The stored version differs from the expected one; here is the current profile.
    case versionMismatch(current: Profile)
    case notFound
}

public enum ProfileStoreError: Error, Sendable, Equatable {
    /// The store cannot answer now (down, timing out, overloaded): 503.
    case unavailable
    /// A profile with this id exists already.
    case idTaken(current: Profile?)
    case usernameTaken
    /// Anything else: a bug or an unexpected schema. Logged, answered with 500.
    case unexpected(String)
}
