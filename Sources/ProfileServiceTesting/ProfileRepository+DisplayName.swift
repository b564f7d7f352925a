public import ProfileService

/// The display-name changes the tests make, as the service's routes make any change: one
/// ``ProfileUpdate`` through ``ProfileRepository/update(_:madeTogether:)``.
extension ProfileRepository {
    /// An optimistic change of the display name alone.
    public func updateDisplayName(id: Int64, to displayName: String, expectedVersion: Int32)
        throws(ProfileStoreError) -> ProfileUpdateOutcome
    {
        try update(ProfileUpdate(id: id, displayName: displayName, expectedVersion: expectedVersion), madeTogether: nil)
    }

    /// ``updateDisplayName(id:to:expectedVersion:)``, for a write a batch may have made.
    public func updateDisplayName(
        id: Int64, to displayName: String, expectedVersion: Int32, madeTogether: WrittenTogether?
    ) throws(ProfileStoreError) -> ProfileUpdateOutcome {
        try update(ProfileUpdate(id: id, displayName: displayName, expectedVersion: expectedVersion), madeTogether: madeTogether)
    }
}
