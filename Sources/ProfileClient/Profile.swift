/// A user's public profile as the service returns it.
///
/// `version` grows by one on every change; it is the profile's `ETag` and the client's
/// read-your-writes token.
public struct Profile: Sendable, Hashable, Codable {
    public var id: Int64
    public var username: String
    public var displayName: String
    public var version: Int32
    /// RFC 3339 timestamp in UTC, as the service formatted it.
    public var updatedAt: String

    public init(id: Int64, username: String, displayName: String, version: Int32, updatedAt: String) {
        self.id = id
        self.username = username
        self.displayName = displayName
        self.version = version
        self.updatedAt = updatedAt
    }

    enum CodingKeys: String, CodingKey {
        case id
        case username
        case displayName = "display_name"
        case version
        case updatedAt = "updated_at"
    }
}
