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

    /// The event decoded, or why its data does not decode (``ProfileClientError/decoding(field:detail:)``,
    /// naming the member); `nil` for events the client does not act on.
    static func decoding(_ event: ServerSentEvent) -> Result<ProfileStreamEvent, ProfileClientError>? {
        let data = Data(event.data.utf8)
        do throws(ProfileClientError) {
            switch event.event {
            case "profile":
                return .success(.profile(try ProfileClient.decode(Profile.self, from: data, what: "a profile event")))
            case "deleted":
                struct Deleted: Decodable { var id: Int64 }
                return .success(.deleted(id: try ProfileClient.decode(Deleted.self, from: data, what: "a deleted event").id))
            default:
                return nil
            }
        } catch {
            return .failure(error)
        }
    }

    /// The events of a batch the client acts on, each decoded; one that does not decode is
    /// skipped and told to `report` (the stream goes on: the service's next version of the
    /// profile still arrives).
    static func decodeBatch(_ events: [ServerSentEvent], report: (ProfileClientError) -> Void) -> [ProfileStreamEvent] {
        events.compactMap { event in
            switch decoding(event) {
            case .success(let decoded)?: return decoded
            case .failure(let error)?:
                report(error)
                return nil
            case nil: return nil
            }
        }
    }
}
