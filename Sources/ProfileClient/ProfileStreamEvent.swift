import Foundation

/// One event of the service's event streams that the client acts on.
enum ProfileStreamEvent: Sendable, Hashable {
    /// `event: profile`: a committed version (`data` is the profile as `GET` returns it).
    case profile(Profile)
    /// `event: deleted` (multi-id streams): the profile does not exist, `data` is `{"id":N}`.
    case deleted(id: Int64)

    var id: Int64 {
        switch self {
        case .profile(let profile): profile.id
        case .deleted(let id): id
        }
    }

    /// `nil` for other events and for data that does not decode.
    init?(_ event: ServerSentEvent) {
        let data = Data(event.data.utf8)
        switch event.event {
        case "profile":
            guard let profile = try? JSONDecoder().decode(Profile.self, from: data) else { return nil }
            self = .profile(profile)
        case "deleted":
            struct Deleted: Decodable { var id: Int64 }
            guard let deleted = try? JSONDecoder().decode(Deleted.self, from: data) else { return nil }
            self = .deleted(id: deleted.id)
        default:
            return nil
        }
    }
}
