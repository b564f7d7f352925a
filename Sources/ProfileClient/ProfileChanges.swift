public import Foundation

/// What one edit of a profile changes (``ProfileClient/edit(id:_:expectedVersion:)``): each
/// member given is set, every other one is left as it is.
///
/// ```swift
/// ProfileChanges(displayName: "Ada")
/// ProfileChanges(username: "ada_l")
/// ProfileChanges(fields: ["bio": "Poetical science", "location": nil])  // nil unsets the field
/// ```
public struct ProfileChanges: Sendable, Hashable {
    /// The new display name, if the edit sets it.
    public var displayName: String?
    /// The new username (a rename), if the edit sets it.
    public var username: String?
    /// The declared fields the edit sets, by name (`bio`, `avatar_url`, …); a `nil` value unsets
    /// the field.
    public var fields: [String: String?]

    public init(displayName: String? = nil, username: String? = nil, fields: [String: String?] = [:]) {
        self.displayName = displayName
        self.username = username
        self.fields = fields
    }
}

extension ProfileChanges {
    /// The members of the edit's merge patch: `display_name`, `username` and the fields, each
    /// with its new value (`nil`: unset).
    var members: [String: String?] {
        var members = fields
        if let displayName { members["display_name"] = .some(displayName) }
        if let username { members["username"] = .some(username) }
        return members
    }

    init(members: [String: String?]) {
        var fields = members
        let displayName = fields.removeValue(forKey: "display_name") ?? nil
        let username = fields.removeValue(forKey: "username") ?? nil
        self.init(displayName: displayName, username: username, fields: fields)
    }

    var isEmpty: Bool { displayName == nil && username == nil && fields.isEmpty }

    /// These changes, then `later` over them: a member both set has `later`'s value.
    func merging(_ later: ProfileChanges) -> ProfileChanges {
        ProfileChanges(members: members.merging(later.members) { $1 })
    }

    /// `profile` with these changes made (its version and time stamp as they were).
    func applied(to profile: Profile) -> Profile {
        var changed = profile
        if let displayName { changed.displayName = displayName }
        if let username { changed.username = username }
        for (name, value) in fields { changed.fields[name] = value }
        return changed
    }

    /// Whether `profile` holds every value these changes set.
    func isHeld(by profile: Profile) -> Bool {
        members.allSatisfy { name, value in profile.member(name) == value }
    }
}

extension Profile {
    /// The value of a member an edit may set: `display_name`, `username` or a field (`nil`: unset).
    func member(_ name: String) -> String? {
        switch name {
        case "display_name": displayName
        case "username": username
        default: fields[name]
        }
    }
}

/// What became of an edit that no caller was waiting for when its answer came: one made before
/// the app last quit and sent after it started again, or one whose caller was cancelled
/// (``ProfileClient/editOutcomes()``).
public struct ProfileEditOutcome: Sendable, Hashable {
    /// The profile edited.
    public var id: Int64
    /// What the edit changes.
    public var changes: ProfileChanges
    /// The profile the service stored, or why it refused the edit:
    /// ``ProfileClientError/conflict(current:)`` when someone else changed what the edit sets
    /// since the version the user saw.
    public var result: Result<Profile, ProfileClientError>
}

extension ProfileClient {
    /// What the client holds of one profile id (``ProfileClient/entry(id:)``).
    public struct Entry: Sendable, Hashable {
        /// The profile as the client shows it (its pending edits included); `nil` while unknown or
        /// deleted.
        public var profile: Profile?
        /// ``profile`` holds an edit of this client the service has not confirmed yet.
        public var isPending: Bool
        /// Edits of the id wait to be sent or answered (offline, they wait for the network).
        public var hasPendingEdits: Bool
        /// The service says no profile has the id.
        public var isDeleted: Bool
        /// The confirmed profile came from the persisted store (``ProfileClientConfiguration/persistenceFile``)
        /// and the service has not confirmed it since the client started.
        public var isFromStore: Bool
        /// When the service last confirmed the profile (a read, a list, a write, an event), as
        /// the device's clock said; `nil` when not known (a store written by an older client).
        public var confirmedAt: Date?
    }
}
