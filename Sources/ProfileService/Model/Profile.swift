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

    /// The API's JSON representation (snake_case keys), as UTF-8 bytes: made once per version, when
    /// the profile is made (a row read, a write's answer), and carried as it is to the cache entry,
    /// the HTTP answer and the live-update event.
    ///
    /// Hand-written rather than `JSONEncoder`: the shape is fixed, and the same bytes are stored
    /// in memcached so that a cache hit sends them as they are.
    public private(set) var jsonBytes: [UInt8]

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
        jsonBytes = []
        encode()
    }

    /// The strong entity tag of this version: `"<version>"`.
    public var entityTag: String { "\"\(version)\"" }

    private mutating func encode() {
        var json = JSONWriter(capacity: 160 + fields.valueBytes)
        json.beginObject()
        json.key("id"); json.integer(id)
        json.key("username"); json.string(username)
        json.key("display_name"); json.string(displayName)
        for field in fields.entries {
            json.key(field.name)
            if let value = field.value { json.string(value) } else { json.null() }
        }
        json.key("version"); json.integer(Int64(version))
        json.key("updated_at"); json.string(updatedAt)
        json.endObject()
        jsonBytes = json.bytes
    }
}

/// A profile's declared fields in declaration order, each with its value or `nil` (unset: JSON
/// `null`, SQL `NULL`).
public struct ProfileFields: Sendable, Hashable {
    public struct Entry: Sendable, Hashable {
        public let name: String
        public var value: String?

        public init(name: String, value: String?) {
            self.name = name
            self.value = value
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
    public var shape: UInt32 { Self.shape(ofNames: entries.map(\.name)) }

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
