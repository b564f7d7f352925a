public import PostgresClient

/// The source of truth for profiles (PostgreSQL in production).
///
/// One value per worker thread: implementations hold a connection that is not thread-safe.
public protocol ProfileStore {
    /// The profile with this id, or `nil`.
    func profile(id: Int64) throws(ProfileStoreError) -> Profile?
    /// The profiles with these ids that exist, by id: one query (a list's misses, §2.7).
    func profiles(ids: [Int64]) throws(ProfileStoreError) -> [Int64: Profile]
    /// The version a deleted profile had last (its tombstone, migrations/0003), or `nil` when
    /// the id was never deleted: the place of a deletion among the id's versions (§4).
    func deletedVersion(id: Int64) throws(ProfileStoreError) -> Int32?
    /// Makes `changes` (the display name and the declared fields they name; the rest stays) and
    /// bumps the version — only if the stored version is `expectedVersion`, or whatever it is
    /// when that is nil (a patch without `If-Match`).
    func update(id: Int64, changes: ProfileChanges, expectedVersion: Int32?) throws(ProfileStoreError) -> ProfileUpdateOutcome
    /// Makes several updates in one statement and one transaction (the writes a batch makes
    /// together, docs/design.md §9.4): each row changes only under the condition its update
    /// states, exactly as ``update(id:changes:expectedVersion:)``.
    ///
    /// - Returns: the updated profiles by id — an update whose id is not among them changed
    ///   nothing (its row is gone or was changed since) — or `nil` when the statement failed and
    ///   changed nothing (a deadlock, say): make each update alone.
    /// - Throws: ``ProfileStoreError/unavailable`` when the database cannot answer, or the
    ///   connection broke and the writes may or may not have committed.
    func updateProfiles(_ updates: [ProfileUpdate]) throws(ProfileStoreError) -> [Int64: Profile]?
    /// Deletes the profile if its stored version is `expectedVersion` (any version when nil). The
    /// row goes; its tombstone keeps only the id and the last version (migrations/0003).
    func delete(id: Int64, expectedVersion: Int32?) throws(ProfileStoreError) -> ProfileDeleteOutcome
    /// Inserts a new profile at version 1 (or above the id's tombstone), with the fields given set.
    func create(id: Int64, username: String, displayName: String, fields: [ProfileFields.Entry]) throws(ProfileStoreError)
        -> Profile
    /// Who holds each of `handles` and for whom each is reserved, by handle (a handle no one
    /// holds or keeps is left out): one query (docs/design.md §12).
    func handles(_ handles: [ProfileHandle]) throws(ProfileStoreError) -> [ProfileHandle: HandleRecord]
    /// Whether the store answers now (readiness).
    func isHealthy() -> Bool
    /// Everything kept about the profile with this id (its row, `created_at`, the handles reserved
    /// for it), read from the primary; `nil` when there is no such profile.
    func export(id: Int64) throws(ProfileStoreError) -> ProfileExport?
    /// How far the primary's write-ahead log is flushed now (`pg_current_wal_flush_lsn()`). A
    /// commit made with `synchronous_commit` on is flushed before it becomes visible, so every
    /// such commit visible before the call lies at or below it, and a standby that has replayed
    /// it has them all (docs/design.md §8).
    func walPosition() throws(ProfileStoreError) -> LSN
}

extension ProfileStore {
    /// One read per id, for stores that cannot do better (test doubles).
    public func profiles(ids: [Int64]) throws(ProfileStoreError) -> [Int64: Profile] {
        var found: [Int64: Profile] = [:]
        for id in ids { if let profile = try profile(id: id) { found[id] = profile } }
        return found
    }

    /// No statement for several writes: each is made alone (test doubles).
    public func updateProfiles(_ updates: [ProfileUpdate]) throws(ProfileStoreError) -> [Int64: Profile]? {
        nil
    }

    /// Sets the display name if the stored version is `expectedVersion`, bumping the version.
    public func updateDisplayName(id: Int64, to displayName: String, expectedVersion: Int32)
        throws(ProfileStoreError) -> ProfileUpdateOutcome
    {
        try update(id: id, changes: ProfileChanges(displayName: displayName), expectedVersion: expectedVersion)
    }

    /// Sets the display name whatever the stored version, bumping the version.
    public func setDisplayName(id: Int64, to displayName: String) throws(ProfileStoreError) -> ProfileUpdateOutcome {
        try update(id: id, changes: ProfileChanges(displayName: displayName), expectedVersion: nil)
    }

    /// Inserts a new profile with no declared field set.
    public func create(id: Int64, username: String, displayName: String) throws(ProfileStoreError) -> Profile {
        try create(id: id, username: username, displayName: displayName, fields: [])
    }
}

/// One change of a profile: the row of `id`, with `changes` made, if it is still at
/// `expectedVersion` (whatever its version when nil: a patch without `If-Match`).
public struct ProfileUpdate: Sendable, Hashable {
    public let id: Int64
    public let changes: ProfileChanges
    public let expectedVersion: Int32?

    public init(id: Int64, changes: ProfileChanges, expectedVersion: Int32?) {
        self.id = id
        self.changes = changes
        self.expectedVersion = expectedVersion
    }

    /// An optimistic change of the display name alone.
    public init(id: Int64, displayName: String, expectedVersion: Int32) {
        self.init(id: id, changes: ProfileChanges(displayName: displayName), expectedVersion: expectedVersion)
    }
}

public enum ProfileUpdateOutcome: Sendable, Equatable {
    case updated(Profile)
    /// The stored version differs from the expected one; here is the current profile.
    case versionMismatch(current: Profile)
    case notFound
}

/// What PostgreSQL says of a handle (docs/design.md §12).
public enum HandleRecord: Sendable, Equatable {
    /// The profile `id`, at `version`, holds it now.
    case held(id: Int64, version: Int32)
    /// Given up by the profile `id` (renamed away or deleted) and kept for it until this time, in
    /// milliseconds since 1970 (PostgreSQL's clock).
    case reserved(id: Int64, untilMilliseconds: Int64)
}

public enum ProfileDeleteOutcome: Sendable, Equatable {
    /// Deleted at this version (the tombstone's).
    case deleted(version: Int32)
    /// The stored version differs from the expected one; here is the current profile.
    case versionMismatch(current: Profile)
    case notFound
}

public enum ProfileStoreError: Error, Sendable, Equatable {
    /// The store cannot answer now (down, timing out, overloaded): 503.
    case unavailable
    /// A profile with this id exists already.
    case idTaken(current: Profile?)
    /// The username's handle is held by another profile, or reserved for one (docs/design.md §12).
    case usernameTaken
    /// Anything else: a bug or an unexpected schema. Logged, answered with 500.
    case unexpected(String)
}
