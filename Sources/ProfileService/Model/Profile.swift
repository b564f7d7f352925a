/// A user's public profile, as stored in PostgreSQL and served by the API.
///
/// `id` is the user's id from the identity system; `version` grows by one on every change and
/// is the profile's `ETag` and read-your-writes token.
public struct Profile: Sendable, Hashable {
    public var id: Int64
    public var username: String
    public var displayName: String
    public var version: Int32
    /// RFC 3339 timestamp in UTC, as PostgreSQL formatted it.
    public var updatedAt: String

    public init(id: Int64, username: String, displayName: String, version: Int32, updatedAt: String) {
        self.id = id
        self.username = username
        self.displayName = displayName
        self.version = version
        self.updatedAt = updatedAt
    }

    /// The strong entity tag of this version: `"<version>"`.
    public var entityTag: String { "\"\(version)\"" }

    /// The API's JSON representation (snake_case keys), as UTF-8 bytes.
    ///
    /// Hand-written rather than `JSONEncoder`: it is on every populate and write, the shape is
    /// fixed, and the same bytes are stored in memcached so that a cache hit sends them as they are.
    public var jsonBytes: [UInt8] {
        var json = JSONWriter()
        json.beginObject()
        json.key("id"); json.integer(id)
        json.key("username"); json.string(username)
        json.key("display_name"); json.string(displayName)
        json.key("version"); json.integer(Int64(version))
        json.key("updated_at"); json.string(updatedAt)
        json.endObject()
        return json.bytes
    }
}
