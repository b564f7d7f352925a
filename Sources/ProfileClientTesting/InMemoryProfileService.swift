import Foundation
public import ProfileClient

/// profile-service in memory, as an ``HTTPTransport``: for an app's unit tests and SwiftUI
/// previews, with no server.
///
/// It answers what the client sends as the service does: `GET /users/profile/{id}` (404 when
/// absent, 304 for a matching `If-None-Match`), `PUT` with optimistic locking (`version`; 409 with
/// the current profile when stale, 201 for a creation with `If-None-Match: *`), `DELETE` (204;
/// with `If-Match`, 409 when stale; a profile created again continues its versions), `PATCH` of
/// `display_name` and the declared fields (with `If-Match`, 409 when stale; `null` unsets a
/// field; a member that is no field is 422; `username` renames), `GET /users/profiles?ids=…`, and
/// the lookups by username (`GET /users/by-username/{username}`, `GET /users/profiles?usernames=…`).
/// A username given up (a rename, a deletion) stays reserved for its profile for good: its
/// lookups redirect (308) to the profile's username now, and another profile taking it, or one
/// a profile holds, is a 409 `username-taken`. It opens no event streams: give the client no
/// event transport.
///
/// ```swift
/// let service = InMemoryProfileService(profiles: [
///     Profile(id: 1, username: "ada", displayName: "Ada", version: 1, updatedAt: .now),
/// ])
/// let client = ProfileClient(configuration: .init(baseURL: URL(string: "http://preview")!), transport: service, eventTransport: nil)
/// service.store(…)  // a change made "on another device"
/// ```
public final class InMemoryProfileService: HTTPTransport {
    private let stored: LockedValue<[Int64: Profile]>
    /// The last version of each deleted id, which a profile created again continues above.
    private let deletedVersions = LockedValue<[Int64: Int32]>([:])
    /// The handles given up, each with the profile it is reserved for.
    private let reserved = LockedValue<[String: Int64]>([:])
    private let requests = LockedValue<[TransportRequest]>([])
    /// The fields it declares beside the name.
    public let fieldNames: Set<String>

    /// - Parameter fieldNames: the declared fields; the service's standard ones by default.
    public init(profiles: [Profile] = [], fieldNames: Set<String> = ["bio", "avatar_url", "location", "website"]) {
        stored = LockedValue(Dictionary(profiles.map { ($0.id, $0) }) { _, last in last })
        self.fieldNames = fieldNames
    }

    /// The declared fields a body sets (`nil`: unset), or the refusal of the member that is no field.
    private func fieldChanges(_ body: [String: Any], besides own: Set<String>) -> (changes: [String: String?], refusal: TransportResponse?) {
        var changes: [String: String?] = [:]
        for (name, value) in body.sorted(by: { $0.key < $1.key }) where !own.contains(name) {
            guard fieldNames.contains(name) else { return ([:], Self.problem(422, "invalid-field", field: name)) }
            switch value {
            case is NSNull: changes[name] = .some(nil)
            case let text as String: changes[name] = text
            default: return ([:], Self.problem(400, "malformed-request", field: name))
            }
        }
        return (changes, nil)
    }

    /// Now, to the microsecond, as the service keeps `updated_at`: the profile it holds is equal to
    /// the one its answers carry.
    private static func now() -> Date {
        let profile = Profile(id: 1, username: "now", displayName: "", version: 1, updatedAt: Date())
        let encoded = try! JSONEncoder().encode(profile)
        return (try? JSONDecoder().decode(Profile.self, from: encoded))?.updatedAt ?? profile.updatedAt
    }

    private static func apply(_ changes: [String: String?], to profile: inout Profile) {
        for (name, value) in changes { profile.fields[name] = value }
    }

    /// The profiles it holds, by id.
    public var profiles: [Int64: Profile] { stored.withLock { $0 } }

    /// Every request it was sent, in order (for a test's assertions).
    public var receivedRequests: [TransportRequest] { requests.withLock { $0 } }

    /// Stores `profile` as it is, as a change made elsewhere would.
    public func store(_ profile: Profile) {
        stored.withLock { $0[profile.id] = profile }
    }

    /// Removes the profile of `id`.
    public func remove(id: Int64) {
        stored.withLock { $0[id] = nil }
    }

    public func send(_ request: TransportRequest) async throws(TransportError) -> TransportResponse {
        requests.withLock { $0.append(request) }
        let path = request.url.path
        let prefix = "/users/profile/"
        if path.hasPrefix(prefix), let id = Int64(path.dropFirst(prefix.count)) {
            switch request.method {
            case "GET": return read(id, request)
            case "PUT": return write(id, request)
            case "PATCH": return patch(id, request)
            case "DELETE": return delete(id, request)
            default: return Self.problem(405, "method-not-allowed")
            }
        }
        if path == "/users/profiles", request.method == "GET" { return list(request) }
        let byUsername = "/users/by-username/"
        if path.hasPrefix(byUsername), request.method == "GET" {
            return lookUp(String(path.dropFirst(byUsername.count)), request)
        }
        return Self.problem(404, "no-such-route")
    }

    private func read(_ id: Int64, _ request: TransportRequest) -> TransportResponse {
        guard let profile = stored.withLock({ $0[id] }) else { return Self.problem(404, "profile-not-found") }
        let tags = (request.headers["If-None-Match"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        if tags.contains("\"\(profile.version)\"") {
            return TransportResponse(status: 304, headers: ["etag": "\"\(profile.version)\""])
        }
        return Self.json(profile)
    }

    private func write(_ id: Int64, _ request: TransportRequest) -> TransportResponse {
        guard let body = request.body,
            let fields = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        else { return Self.problem(400, "malformed-request") }
        guard let displayName = fields["display_name"] as? String, !displayName.isEmpty else {
            return Self.problem(422, "invalid-field", field: "display_name")
        }
        let (changes, refusal) = fieldChanges(fields, besides: ["display_name", "username", "version", "id", "updated_at"])
        if let refusal { return refusal }
        let now = Self.now()
        return stored.withLock { stored in
            let current = stored[id]
            if request.headers["If-None-Match"] == "*" {
                if let current { return Self.problem(409, "profile-exists", current: current) }
                guard let username = fields["username"] as? String else {
                    return Self.problem(422, "missing-field", field: "username")
                }
                if let refusal = take(username, for: id, among: stored) { return refusal }
                let version = (deletedVersions.withLock { $0[id] } ?? 0) + 1
                var created = Profile(id: id, username: username, displayName: displayName, version: version, updatedAt: now)
                Self.apply(changes, to: &created)
                stored[id] = created
                return Self.json(created, status: 201)
            }
            guard let current else { return Self.problem(404, "profile-not-found") }
            guard let version = fields["version"] as? Int else { return Self.problem(422, "missing-field", field: "version") }
            guard version == Int(current.version) else { return Self.problem(409, "version-conflict", current: current) }
            var written = current
            written.displayName = displayName
            Self.apply(changes, to: &written)
            written.version += 1
            written.updatedAt = now
            stored[id] = written
            return Self.json(written)
        }
    }

    private func patch(_ id: Int64, _ request: TransportRequest) -> TransportResponse {
        guard let body = request.body,
            let fields = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        else { return Self.problem(400, "malformed-request") }
        let (changes, refusal) = fieldChanges(fields, besides: ["display_name", "username"])
        if let refusal { return refusal }
        let displayName = fields["display_name"]
        if displayName != nil, (displayName as? String)?.isEmpty != false {
            return Self.problem(422, "invalid-field", field: "display_name")
        }
        let username = fields["username"]
        if username != nil, !(username is String) { return Self.problem(422, "invalid-username", field: "username") }
        guard displayName != nil || username != nil || !changes.isEmpty else {
            return Self.problem(422, "missing-field")
        }
        return stored.withLock { stored in
            guard var written = stored[id] else { return Self.problem(404, "profile-not-found") }
            if let tag = request.headers["If-Match"], tag != "\"\(written.version)\"" {
                return Self.problem(409, "version-conflict", current: written)
            }
            if let username = username as? String, username != written.username {
                if let refusal = take(username, for: id, among: stored) { return refusal }
                let given = ProfileClient.handle(of: written.username)
                // A new spelling of the same handle gives nothing up.
                if given != ProfileClient.handle(of: username) { reserved.withLock { $0[given] = id } }
                written.username = username
            }
            if let displayName = displayName as? String { written.displayName = displayName }
            Self.apply(changes, to: &written)
            written.version += 1
            written.updatedAt = Self.now()
            stored[id] = written
            return Self.json(written)
        }
    }

    private func delete(_ id: Int64, _ request: TransportRequest) -> TransportResponse {
        stored.withLock { stored in
            guard let current = stored[id] else { return Self.problem(404, "profile-not-found") }
            if let tag = request.headers["If-Match"], tag != "\"\(current.version)\"" {
                return Self.problem(409, "version-conflict", current: current)
            }
            stored[id] = nil
            deletedVersions.withLock { $0[id] = current.version }
            reserved.withLock { $0[ProfileClient.handle(of: current.username)] = id }
            return TransportResponse(status: 204, headers: [:])
        }
    }

    /// Takes the handle of `username` for profile `id`, taking back its own reservation; the
    /// refusal when another profile holds it or has it reserved.
    private func take(_ username: String, for id: Int64, among stored: [Int64: Profile]) -> TransportResponse? {
        let handle = ProfileClient.handle(of: username)
        guard ProfileClient.isUsername(username) else {
            return Self.problem(422, "invalid-username", field: "username")
        }
        let other = stored.values.first { $0.id != id && ProfileClient.handle(of: $0.username) == handle }
        return reserved.withLock { reserved in
            if other != nil || reserved[handle].map({ $0 != id }) == true {
                return Self.problem(409, "username-taken", field: "username")
            }
            reserved[handle] = nil
            return nil
        }
    }

    /// The profile that holds `username`, or the one it is reserved for (a rename or a deletion
    /// away from it).
    private func holder(of username: String) -> (profile: Profile?, renamedFrom: Bool) {
        let handle = ProfileClient.handle(of: username)
        let stored = self.stored.withLock { $0 }
        if let profile = stored.values.first(where: { ProfileClient.handle(of: $0.username) == handle }) {
            return (profile, false)
        }
        guard let owner = reserved.withLock({ $0[handle] }) else { return (nil, false) }
        return (stored[owner], true)
    }

    private func lookUp(_ username: String, _ request: TransportRequest) -> TransportResponse {
        guard ProfileClient.isUsername(username) else {
            return Self.problem(400, "invalid-username", field: "username")
        }
        switch holder(of: username) {
        case (let profile?, false): return Self.json(profile)
        case (let profile?, true):
            let query = request.url.query.map { "?\($0)" } ?? ""
            let location = "/users/by-username/\(profile.username)\(query)"
            return TransportResponse(status: 308, headers: ["location": location])
        default: return Self.problem(404, "profile-not-found")
        }
    }

    private func listByUsername(_ usernames: [String]) -> TransportResponse {
        var profiles: [Profile] = []
        var missing: [String] = []
        var renamed: [String: String] = [:]
        for username in usernames {
            // Named by handle, as the service names them.
            guard case (let profile?, let renamedFrom) = holder(of: username) else {
                missing.append(ProfileClient.handle(of: username))
                continue
            }
            if renamedFrom { renamed[ProfileClient.handle(of: username)] = profile.username }
            if !profiles.contains(where: { $0.id == profile.id }) { profiles.append(profile) }
        }
        let object: [String: Any] = ["profiles": profiles.map(Self.object), "missing": missing, "renamed": renamed]
        return TransportResponse(
            status: 200, headers: ["content-type": "application/json"],
            body: (try? JSONSerialization.data(withJSONObject: object)) ?? Data())
    }

    private func list(_ request: TransportRequest) -> TransportResponse {
        let items = URLComponents(url: request.url, resolvingAgainstBaseURL: true)?.queryItems ?? []
        if let usernames = items.first(where: { $0.name == "usernames" })?.value {
            return listByUsername(usernames.split(separator: ",").map(String.init))
        }
        let ids = (items.first { $0.name == "ids" }?.value ?? "").split(separator: ",")
            .compactMap { Int64($0.split(separator: "@").first ?? "") }
        let stored = self.stored.withLock { $0 }
        let object: [String: Any] = [
            "profiles": ids.compactMap { stored[$0] }.map(Self.object),
            "missing": ids.filter { stored[$0] == nil },
        ]
        return TransportResponse(
            status: 200, headers: ["content-type": "application/json"],
            body: (try? JSONSerialization.data(withJSONObject: object)) ?? Data())
    }

    private static func object(_ profile: Profile) -> Any {
        (try? JSONSerialization.jsonObject(with: JSONEncoder().encode(profile))) ?? [:]
    }

    private static func json(_ profile: Profile, status: Int = 200) -> TransportResponse {
        TransportResponse(
            status: status, headers: ["content-type": "application/json", "etag": "\"\(profile.version)\""],
            body: (try? JSONEncoder().encode(profile)) ?? Data())
    }

    private static func problem(_ status: Int, _ kind: String, field: String? = nil, current: Profile? = nil)
        -> TransportResponse
    {
        var object: [String: Any] = ["type": "tag:profile-service,2026:\(kind)", "status": status, "detail": kind]
        if let field { object["field"] = field }
        if let current { object["current"] = Self.object(current) }
        return TransportResponse(
            status: status, headers: ["content-type": "application/problem+json"],
            body: (try? JSONSerialization.data(withJSONObject: object)) ?? Data())
    }
}
