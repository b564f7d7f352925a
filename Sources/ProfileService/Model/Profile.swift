/// A user's public profile, as stored in PostgreSQL and served by the API.
///
/// `id` is the user's id from the identity system; `version` grows by one on every change and
/// is the profile's `ETag` and read-your-writes token.
public struct Profile: Sendable, Hashable {
    public var id: Int64 { didSet { encode() } }
    public var username: String { didSet { encode() } }
    public var displayName: String { didSet { encode() } }
    /// The declared fields (``ProfileFieldCatalog``), in their order, each with its value or unset.
    public var fields: ProfileFields { didSet { encode() } }
    public var version: Int32 { didSet { encode() } }
    /// RFC 3339 timestamp in UTC, as PostgreSQL formatted it.
    public var updatedAt: String { didSet { encode() } }

    /// The API's JSON representation (snake_case keys) in its two views, as UTF-8 bytes: made once
    /// per version, when the profile is made (a row read, a write's answer), and carried as it is to
    /// the cache entry, the HTTP answer and the live-update event.
    ///
    /// Hand-written rather than `JSONEncoder`: the shape is fixed, and the same bytes are stored
    /// in memcached so that a cache hit sends them as they are.
    public private(set) var json: ProfileJSON

    public init(
        id: Int64, username: String, displayName: String, fields: ProfileFields = ProfileFields(), version: Int32,
        updatedAt: String
    ) {
        self.id = id
        self.username = username
        self.displayName = displayName
        self.fields = fields
        self.version = version
        self.updatedAt = updatedAt
        json = ProfileJSON(publicView: [], ownerMembers: [])
        encode()
    }

    /// The strong entity tag of `view` of this version (``ProfileJSON/entityTag(version:view:)``).
    public func entityTag(_ view: ProfileView) -> String { json.entityTag(version: version, view: view) }

    /// The JSON its owner reads (and an administrator): every field.
    public var ownerJSON: [UInt8] { json.view(.owner) }

    /// The public view's members in order, `version` and `updated_at` last; then the owner-only
    /// fields, each with its comma, in their order (docs/design.md §13.1).
    private mutating func encode() {
        var writer = JSONWriter(capacity: 160 + fields.valueBytes)
        writer.beginObject()
        writer.key("id"); writer.integer(id)
        writer.key("username"); writer.string(username)
        writer.key("display_name"); writer.string(displayName)
        for field in fields.entries where !field.isOwnerOnly {
            writer.key(field.name)
            if let value = field.value { writer.string(value) } else { writer.null() }
        }
        writer.key("version"); writer.integer(Int64(version))
        writer.key("updated_at"); writer.string(updatedAt)
        writer.endObject()
        var owner = JSONWriter.continuingMembers()
        for field in fields.entries where field.isOwnerOnly {
            owner.key(field.name)
            if let value = field.value { owner.string(value) } else { owner.null() }
        }
        json = ProfileJSON(publicView: writer.bytes, ownerMembers: owner.bytes[...])
    }
}

/// Which view of a profile an answer carries (docs/design.md §13).
public enum ProfileView: Sendable, Hashable {
    /// Every field anyone may read: what an answer to anyone but the owner carries.
    case anyone
    /// Every field: the owner's, and an administrator's.
    case owner
}

/// A profile's JSON as two parts: the public view, complete, and the owner-only members that the
/// owner's view adds after its last member. A cache entry keeps both (``CacheEntry``), so a hit
/// answers either view from one entry: the public one as it is, the owner's with one copy.
public struct ProfileJSON: Sendable, Hashable {
    /// The view of anyone but the owner: every member except the owner-only fields.
    public var publicView: [UInt8]
    /// The owner-only fields as members, each after its comma (`,"email":"ada@example.com"`);
    /// empty when no field is owner-only.
    public var ownerMembers: ArraySlice<UInt8>

    public init(publicView: [UInt8], ownerMembers: ArraySlice<UInt8>) {
        self.publicView = publicView
        self.ownerMembers = ownerMembers
    }

    /// Whether the views differ: some field is owner-only. Only then does an answer depend on
    /// who asks (`Vary: Authorization`, two entity tags).
    public var hasOwnerView: Bool { !ownerMembers.isEmpty }

    /// The bytes of `view`.
    public func view(_ view: ProfileView) -> [UInt8] {
        guard view == .owner, hasOwnerView else { return publicView }
        var bytes = publicView
        bytes.reserveCapacity(publicView.count + ownerMembers.count)
        bytes.removeLast()  // the public view's closing brace
        bytes += ownerMembers
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// The strong entity tag of `view` at `version`: `"7"`, and `"7-public"` for the public view
    /// when the views differ — two representations, two tags, so that a cache holding both
    /// variants never answers one with the other's validator (RFC 9110 §8.8.3).
    public func entityTag(version: Int32, view: ProfileView) -> String {
        view == .anyone && hasOwnerView ? "\"\(version)-public\"" : "\"\(version)\""
    }
}

/// A profile's declared fields in declaration order, each with its value or `nil` (unset: JSON
/// `null`, SQL `NULL`).
public struct ProfileFields: Sendable, Hashable {
    public struct Entry: Sendable, Hashable {
        public let name: String
        public var value: String?
        /// Read by the profile's owner alone (``ProfileFieldDeclaration/readBy``): kept out of the
        /// public view of the profile's JSON.
        public let isOwnerOnly: Bool

        public init(name: String, value: String?, isOwnerOnly: Bool = false) {
            self.name = name
            self.value = value
            self.isOwnerOnly = isOwnerOnly
        }

        /// The declared field `declaration` with `value`.
        public init(_ declaration: ProfileFieldDeclaration, value: String?) {
            self.init(name: declaration.name, value: value, isOwnerOnly: declaration.readBy == .owner)
        }
    }

    public private(set) var entries: [Entry]

    public init(_ entries: [Entry] = []) {
        self.entries = entries
    }

    /// The value of the field `name`; nil when it is unset or not a field.
    public subscript(name: String) -> String? {
        entries.first { $0.name == name }?.value
    }

    /// Sets the fields `changes` names that are among these; returns the names it did not know.
    @discardableResult
    public mutating func apply(_ changes: [Entry]) -> [String] {
        var unknown: [String] = []
        for change in changes {
            if let index = entries.firstIndex(where: { $0.name == change.name }) {
                entries[index].value = change.value
            } else {
                unknown.append(change.name)
            }
        }
        return unknown
    }

    /// Which fields, in which order: FNV-1a over the names. A profile's cache entry carries it
    /// (``ProfileFieldCatalog/shape``); no fields at all is the shape of every entry written
    /// before fields existed.
    public var shape: UInt32 { Self.shape(ofNames: entries.map { Self.shapeName($0.name, isOwnerOnly: $0.isOwnerOnly) }) }

    /// A field's name as the shape counts it: an owner-only field's is marked, so that entries
    /// written while it was public are of another shape to an instance that keeps it private (and
    /// the other way round) — a rolling restart that hides a field never serves it from an old entry.
    static func shapeName(_ name: String, isOwnerOnly: Bool) -> String {
        isOwnerOnly ? name + "!owner" : name
    }

    static func shape(ofNames names: [String]) -> UInt32 {
        var hash: UInt32 = 2_166_136_261
        for name in names {
            for byte in name.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
            hash = (hash ^ UInt32(UInt8(ascii: ";"))) &* 16_777_619
        }
        return hash
    }

    /// The values' UTF-8 bytes together, to size a JSON buffer.
    var valueBytes: Int {
        entries.reduce(0) { $0 + ($1.value?.utf8.count ?? 0) + $1.name.utf8.count + 8 }
    }
}

/// What a write sets: the display name when it gives one, and each declared field it names
/// (`nil`: unset it). Everything it does not name stays as it is.
public struct ProfileChanges: Sendable, Hashable {
    public var displayName: String?
    public var fields: [ProfileFields.Entry]
    /// A new username: a rename (docs/design.md §12); nil leaves it.
    public var username: String?

    public init(displayName: String? = nil, fields: [ProfileFields.Entry] = [], username: String? = nil) {
        self.displayName = displayName
        self.fields = fields
        self.username = username
    }

    public var isEmpty: Bool { displayName == nil && fields.isEmpty && username == nil }

    /// `profile` with these changes made (the version and time are the caller's).
    public func applied(to profile: Profile) -> Profile {
        var changed = profile
        if let displayName { changed.displayName = displayName }
        if let username { changed.username = username }
        changed.fields.apply(fields)
        return changed
    }

    /// The fields as one JSON object (`{"bio":"…","website":null}`): how a statement receives
    /// them, whatever fields are declared (one parameter, `$n::jsonb`).
    public var fieldsJSON: String {
        var json = JSONWriter(capacity: 64)
        json.beginObject()
        for field in fields {
            json.key(field.name)
            if let value = field.value { json.string(value) } else { json.null() }
        }
        json.endObject()
        return String(decoding: json.bytes, as: UTF8.self)
    }
}
