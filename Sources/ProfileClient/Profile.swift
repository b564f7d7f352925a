public import Foundation

/// A user's public profile as the service returns it.
///
/// `version` grows by one on every change; it is the profile's `ETag` and the client's
/// read-your-writes token.
public struct Profile: Sendable, Hashable, Codable, Identifiable {
    public var id: Int64
    public var username: String
    public var displayName: String
    /// The fields the service declares beside the name (`bio`, `avatar_url`, `location`,
    /// `website`, and any an operator adds), by name; a field that is unset is absent.
    public var fields: [String: String]
    public var version: Int32
    /// When the version was committed (the service's `updated_at`, to the microsecond).
    public var updatedAt: Date

    public init(
        id: Int64, username: String, displayName: String, fields: [String: String] = [:], version: Int32, updatedAt: Date
    ) {
        self.id = id
        self.username = username
        self.displayName = displayName
        self.fields = fields
        self.version = version
        self.updatedAt = updatedAt
    }

    /// The profile's own members; every other member of its JSON is a declared field.
    static let ownMembers: Set<String> = ["id", "username", "display_name", "version", "updated_at"]

    struct Member: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Member.self)
        id = try container.decode(Int64.self, forKey: Member("id"))
        username = try container.decode(String.self, forKey: Member("username"))
        displayName = try container.decode(String.self, forKey: Member("display_name"))
        version = try container.decode(Int32.self, forKey: Member("version"))
        let timestamp = try container.decode(String.self, forKey: Member("updated_at"))
        guard let updatedAt = Timestamp.parse(timestamp) else {
            throw DecodingError.dataCorruptedError(
                forKey: Member("updated_at"), in: container, debugDescription: "not an RFC 3339 timestamp: \(timestamp)")
        }
        self.updatedAt = updatedAt
        fields = [:]
        for key in container.allKeys where !Self.ownMembers.contains(key.stringValue) {
            if let value = try container.decodeIfPresent(String.self, forKey: key) { fields[key.stringValue] = value }
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Member.self)
        try container.encode(id, forKey: Member("id"))
        try container.encode(username, forKey: Member("username"))
        try container.encode(displayName, forKey: Member("display_name"))
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) { try container.encode(value, forKey: Member(name)) }
        try container.encode(version, forKey: Member("version"))
        try container.encode(Timestamp.format(updatedAt), forKey: Member("updated_at"))
    }
}
