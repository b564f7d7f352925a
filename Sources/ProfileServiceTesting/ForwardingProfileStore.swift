public import PostgresClient
public import ProfileService

/// A ``ProfileService/ProfileStore`` that hands every call to `base`: the starting point of a test
/// double that changes one call (injects a fault, counts reads) and must keep up with the protocol
/// without restating the rest.
open class ForwardingProfileStore: ProfileStore {
    public let base: any ProfileStore

    public init(_ base: any ProfileStore) {
        self.base = base
    }

    open func profile(id: Int64) throws(ProfileStoreError) -> Profile? {
        try base.profile(id: id)
    }

    open func profiles(ids: [Int64]) throws(ProfileStoreError) -> [Int64: Profile] {
        try base.profiles(ids: ids)
    }

    open func deletedVersion(id: Int64) throws(ProfileStoreError) -> Int32? {
        try base.deletedVersion(id: id)
    }

    open func update(id: Int64, changes: ProfileChanges, expectedVersion: Int32?) throws(ProfileStoreError)
        -> ProfileUpdateOutcome
    {
        try base.update(id: id, changes: changes, expectedVersion: expectedVersion)
    }

    open func updateProfiles(_ updates: [ProfileUpdate]) throws(ProfileStoreError) -> [Int64: Profile]? {
        try base.updateProfiles(updates)
    }

    open func delete(id: Int64, expectedVersion: Int32?) throws(ProfileStoreError) -> ProfileDeleteOutcome {
        try base.delete(id: id, expectedVersion: expectedVersion)
    }

    open func create(id: Int64, username: String, displayName: String, fields: [ProfileFields.Entry])
        throws(ProfileStoreError) -> Profile
    {
        try base.create(id: id, username: username, displayName: displayName, fields: fields)
    }

    open func handles(_ handles: [ProfileHandle]) throws(ProfileStoreError) -> [ProfileHandle: HandleRecord] {
        try base.handles(handles)
    }

    open func export(id: Int64) throws(ProfileStoreError) -> ProfileExport? {
        try base.export(id: id)
    }

    open func isHealthy() -> Bool {
        base.isHealthy()
    }

    open func walPosition() throws(ProfileStoreError) -> LSN {
        try base.walPosition()
    }
}
