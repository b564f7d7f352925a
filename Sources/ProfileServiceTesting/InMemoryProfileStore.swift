import Foundation
public import PostgresClient
public import ProfileService
import Synchronization

/// The profiles table in memory, with the rules the cache protocol relies on (docs/design.md
/// §2.5): versions start at 1, the optimistic update raises the version by one when the expected
/// version matches, an id and a username are unique, and a re-created id continues above the
/// version its deleted row had (the tombstone). Shared by every worker of a test.
public final class InMemoryDatabase: Sendable {
    struct State {
        var rows: [Int64: Profile] = [:]
        var tombstones: [Int64: Int32] = [:]
        /// Handles given up, by handle: their last owner and until when (ms since 1970).
        var reservations: [String: Reservation] = [:]
        /// When each row was made (`created_at`), RFC 3339.
        var createdAt: [Int64: String] = [:]
        var reservationMilliseconds: Int64 = 30 * 86_400_000
        var reads = 0
        var unavailable = false
        /// Every change in commit order, as a write-ahead log: its length is the position, and a
        /// standby (``InMemoryStandby``) sees the rows as of a prefix of it.
        var log: [(id: Int64, row: Profile?)] = []

        mutating func commit(_ id: Int64, _ row: Profile?) {
            if let row { rows[id] = row } else { rows[id] = nil }
            log.append((id, row))
        }

        /// The update: the row (at the expected version, when the update names one) gets the
        /// changes and the next version.
        mutating func update(_ write: ProfileUpdate) throws(ProfileStoreError) -> ProfileUpdateOutcome {
            guard let current = rows[write.id] else { return .notFound }
            if let expected = write.expectedVersion, current.version != expected { return .versionMismatch(current: current) }
            if let username = write.changes.username { try take(username, for: write.id, givingUp: current.username) }
            var updated = write.changes.applied(to: current)
            updated.version = current.version + 1
            updated.updatedAt = InMemoryDatabase.timestamp()
            commit(write.id, updated)
            return .updated(updated)
        }

        /// The deletion, at the expected version if one is given; the tombstone keeps the version.
        mutating func delete(id: Int64, expectedVersion: Int32?) -> ProfileDeleteOutcome {
            guard let current = rows[id] else { return .notFound }
            if let expectedVersion, current.version != expectedVersion { return .versionMismatch(current: current) }
            tombstones[id] = max(tombstones[id] ?? 0, current.version)
            if let handle = ProfileHandle(username: current.username) { reserve(handle, spelled: current.username, for: id) }
            commit(id, nil)
            return .deleted(version: current.version)
        }

        /// The rules of migrations/0007_handles.sql: a handle held by another profile or reserved
        /// for one is taken; the owner's own reservation is taken back; the old handle is reserved.
        mutating func take(_ username: String, for id: Int64, givingUp old: String?) throws(ProfileStoreError) {
            guard let handle = ProfileHandle(username: username) else { throw .unexpected("not a username: \(username)") }
            let oldHandle = old.flatMap { ProfileHandle(username: $0) }
            if handle == oldHandle { return }
            if rows.values.contains(where: { $0.id != id && handle.isSpelled(by: $0.username) }) { throw .usernameTaken }
            if let reservation = reservations[handle.key], reservation.until > Self.now, reservation.id != id { throw .usernameTaken }
            reservations[handle.key] = nil
            if let oldHandle, let old { reserve(oldHandle, spelled: old, for: id) }
        }

        mutating func reserve(_ handle: ProfileHandle, spelled username: String, for id: Int64) {
            reservations[handle.key] = Reservation(
                id: id, username: username, releasedAt: InMemoryDatabase.timestamp(), until: Self.now + reservationMilliseconds)
        }

        static var now: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
    }

    /// A handle given up: its last owner, the spelling it had, when, and until when (ms since 1970).
    struct Reservation {
        var id: Int64
        var username: String
        var releasedAt: String
        var until: Int64
    }

    private let state = Mutex(State())

    /// How long a handle given up stays reserved (`profile_handle_settings.reservation`).
    public func setHandleReservation(milliseconds: Int64) {
        state.withLock { $0.reservationMilliseconds = milliseconds }
    }

    /// The declared fields every row carries.
    public let profileFields: ProfileFieldCatalog

    public init(profileFields: ProfileFieldCatalog = .standard) {
        self.profileFields = profileFields
    }

    /// A store for one worker, as each worker has its own PostgreSQL connection.
    public func store() -> InMemoryProfileStore { InMemoryProfileStore(database: self) }

    /// Rows read so far (every `profile(id:)`), the evidence of how often a read reached the store.
    public var reads: Int { state.withLock { $0.reads } }

    /// Every call fails with ``ProfileStoreError/unavailable`` until set back (an injected fault).
    public func setUnavailable(_ unavailable: Bool) { state.withLock { $0.unavailable = unavailable } }

    /// Deletes a row behind the service's back, as `DELETE` in SQL would (a tombstone keeps its version).
    public func delete(id: Int64) {
        state.withLock { state in _ = state.delete(id: id, expectedVersion: nil) }
    }

    static func timestamp(_ date: Date = Date()) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    /// The log's length: the position every commit so far lies at or below.
    public var position: Int { state.withLock { $0.log.count } }

    /// The row of `id` as of the first `position` changes: what a standby that replayed that far shows.
    public func row(id: Int64, asOf position: Int) -> Profile? {
        state.withLock { state in
            state.log[..<min(position, state.log.count)].last(where: { $0.id == id })?.row
        }
    }

    fileprivate func withState<Result>(_ body: (inout State) throws(ProfileStoreError) -> Result) throws(ProfileStoreError) -> Result {
        try state.withLock { (state: inout State) throws(ProfileStoreError) -> Result in
            if state.unavailable { throw .unavailable }
            return try body(&state)
        }
    }
}

/// One worker's ``ProfileStore`` over an ``InMemoryDatabase``.
public final class InMemoryProfileStore: ProfileStore {
    public let database: InMemoryDatabase

    init(database: InMemoryDatabase) { self.database = database }

    public func profile(id: Int64) throws(ProfileStoreError) -> Profile? {
        try database.withState { (state: inout InMemoryDatabase.State) throws(ProfileStoreError) -> Profile? in
            state.reads += 1
            return state.rows[id]
        }
    }

    public func deletedVersion(id: Int64) throws(ProfileStoreError) -> Int32? {
        try database.withState { (state: inout InMemoryDatabase.State) throws(ProfileStoreError) -> Int32? in
            state.rows[id] == nil ? state.tombstones[id] : nil
        }
    }

    public func update(id: Int64, changes: ProfileChanges, expectedVersion: Int32?) throws(ProfileStoreError)
        -> ProfileUpdateOutcome
    {
        try database.withState { (state: inout InMemoryDatabase.State) throws(ProfileStoreError) -> ProfileUpdateOutcome in
            try state.update(ProfileUpdate(id: id, changes: changes, expectedVersion: expectedVersion))
        }
    }

    public func handles(_ handles: [ProfileHandle]) throws(ProfileStoreError) -> [ProfileHandle: HandleRecord] {
        try database.withState { (state: inout InMemoryDatabase.State) throws(ProfileStoreError) -> [ProfileHandle: HandleRecord] in
            state.reads += 1
            var records: [ProfileHandle: HandleRecord] = [:]
            for handle in handles {
                if let holder = state.rows.values.first(where: { handle.isSpelled(by: $0.username) }) {
                    records[handle] = .held(id: holder.id, version: holder.version)
                } else if let reservation = state.reservations[handle.key], reservation.until > InMemoryDatabase.State.now {
                    records[handle] = .reserved(id: reservation.id, untilMilliseconds: reservation.until)
                }
            }
            return records
        }
    }

    public func export(id: Int64) throws(ProfileStoreError) -> ProfileExport? {
        try database.withState { (state: inout InMemoryDatabase.State) throws(ProfileStoreError) -> ProfileExport? in
            guard let row = state.rows[id] else { return nil }
            let reservations = state.reservations.values
                .filter { $0.id == id && $0.until > InMemoryDatabase.State.now }
                .sorted { $0.releasedAt < $1.releasedAt }
                .map {
                    UsernameReservation(
                        username: $0.username, releasedAt: $0.releasedAt,
                        reservedUntil: InMemoryDatabase.timestamp(Date(timeIntervalSince1970: Double($0.until) / 1000)))
                }
            return ProfileExport(profile: row, createdAt: state.createdAt[id] ?? row.updatedAt, usernameReservations: reservations)
        }
    }

    public func delete(id: Int64, expectedVersion: Int32?) throws(ProfileStoreError) -> ProfileDeleteOutcome {
        try database.withState { (state: inout InMemoryDatabase.State) throws(ProfileStoreError) -> ProfileDeleteOutcome in
            state.delete(id: id, expectedVersion: expectedVersion)
        }
    }

    /// All of them under one lock, as one transaction.
    public func updateProfiles(_ writes: [ProfileUpdate]) throws(ProfileStoreError) -> [Int64: Profile]? {
        // A rename may be refused, which refuses PostgreSQL's whole statement: each is made alone.
        if writes.contains(where: { $0.changes.username != nil }) { return nil }
        return try database.withState { (state: inout InMemoryDatabase.State) throws(ProfileStoreError) -> [Int64: Profile]? in
            var updated: [Int64: Profile] = [:]
            for write in writes {
                if case .updated(let row) = try state.update(write) { updated[write.id] = row }
            }
            return updated
        }
    }

    public func create(id: Int64, username: String, displayName: String, fields: [ProfileFields.Entry])
        throws(ProfileStoreError) -> Profile
    {
        var declared = database.profileFields.unsetFields
        declared.apply(fields)
        return try database.withState { (state: inout InMemoryDatabase.State) throws(ProfileStoreError) -> Profile in
            if let current = state.rows[id] { throw .idTaken(current: current) }
            try state.take(username, for: id, givingUp: nil)
            let profile = Profile(
                id: id, username: username, displayName: displayName, fields: declared,
                version: (state.tombstones[id] ?? 0) + 1, updatedAt: InMemoryDatabase.timestamp())
            state.commit(id, profile)
            state.createdAt[id] = profile.updatedAt
            return profile
        }
    }

    public func walPosition() throws(ProfileStoreError) -> LSN {
        try database.withState { (state: inout InMemoryDatabase.State) throws(ProfileStoreError) -> LSN in
            LSN(rawValue: UInt64(state.log.count))
        }
    }

    public func isHealthy() -> Bool {
        (try? database.withState { (_: inout InMemoryDatabase.State) throws(ProfileStoreError) -> Bool in true }) ?? false
    }
}
