import Foundation

/// Everything the service keeps about one profile, for its owner (`GET /users/profile/{id}/export`,
/// the right of access and to portability: GDPR Art. 15 and 20): every field whoever reads it,
/// when the profile was made and last changed, its version, and the handles kept for it.
public struct ProfileExport: Sendable, Hashable {
    public var profile: Profile
    /// RFC 3339 in UTC, as PostgreSQL formatted it.
    public var createdAt: String
    /// The handles the profile gave up that are still reserved for it (docs/design.md §12.1).
    public var usernameReservations: [UsernameReservation]

    public init(profile: Profile, createdAt: String, usernameReservations: [UsernameReservation]) {
        self.profile = profile
        self.createdAt = createdAt
        self.usernameReservations = usernameReservations
    }

    /// The export's document: one JSON object, `exportedAt` its time of making.
    func document(catalog: ProfileFieldCatalog, exportedAt: String) -> [UInt8] {
        var json = JSONWriter(capacity: 512 + profile.fields.valueBytes)
        json.beginObject()
        json.member("exported_at", exportedAt)
        json.key("profile"); json.raw(profile.ownerJSON)
        json.member("created_at", createdAt)
        json.key("username_reservations")
        json.beginArray()
        for reservation in usernameReservations {
            json.beginObject()
            json.member("username", reservation.username)
            json.member("released_at", reservation.releasedAt)
            json.member("reserved_until", reservation.reservedUntil)
            json.endObject()
        }
        json.endArray()
        // What each field is and who reads and writes it: the document explains itself.
        json.key("fields")
        json.beginArray()
        for declaration in catalog.declarations {
            json.beginObject()
            json.member("name", declaration.name)
            json.member("kind", declaration.kind.rawValue)
            json.member("max_length", declaration.maximumLength)
            json.member("read_by", declaration.readBy.rawValue)
            json.member("written_by", declaration.writtenBy.rawValue)
            json.endObject()
        }
        json.endArray()
        json.endObject()
        return json.bytes
    }
}

/// A handle given up and kept for its last holder (`username_reservations`).
public struct UsernameReservation: Sendable, Hashable, Decodable {
    /// The spelling the profile had.
    public var username: String
    /// RFC 3339 in UTC: when the profile gave it up.
    public var releasedAt: String
    /// RFC 3339 in UTC: until when no one else may take it.
    public var reservedUntil: String

    public init(username: String, releasedAt: String, reservedUntil: String) {
        self.username = username
        self.releasedAt = releasedAt
        self.reservedUntil = reservedUntil
    }

    enum CodingKeys: String, CodingKey {
        case username, releasedAt = "released_at", reservedUntil = "reserved_until"
    }
}
