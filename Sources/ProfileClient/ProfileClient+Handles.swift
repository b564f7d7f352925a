import Foundation

/// The answer to ``ProfileClient/profiles(usernames:)``: the profiles found, in the order asked
/// (each once), the usernames no profile holds, and the usernames asked for that their profile
/// gave up, with the one it has now.
public struct ProfilesByUsername: Sendable, Hashable {
    /// The profiles found, in the order their usernames were asked for; a profile asked for by
    /// two names (its old one and its new one) is given once.
    public var profiles: [Profile]
    /// The usernames no profile holds, or whose profile was deleted, as asked.
    public var missing: [String]
    /// Usernames asked for that their profile renamed away from (and still has reserved), each
    /// with the username the profile has now: the profile is in ``profiles``.
    public var renamed: [String: String]

    public init(profiles: [Profile], missing: [String], renamed: [String: String] = [:]) {
        self.profiles = profiles
        self.missing = missing
        self.renamed = renamed
    }
}

extension ProfileClient {
    /// The most redirects a lookup by username follows: the service redirects an old username
    /// straight to the current one, so one is the rule.
    static let maximumUsernameRedirects = 4

    /// The most usernames the service answers in one list request.
    static let maximumUsernamesPerRequest = 100

    /// Reads the profile that holds `username` now (`GET /users/by-username/{username}`),
    /// compared without case: `Ada` and `ada` find the same profile.
    ///
    /// A username its profile renamed away from (and still has reserved) finds that profile under
    /// its new username: the service answers 308 with the new one, which the client follows — or
    /// the transport does, as URLSession does. The profile is then the client's as if read by
    /// ``fetch(id:policy:)``: it reaches the observers of its id, and it is never older than a
    /// version the client learned of its id — a lookup of a username the client knows a profile
    /// by passes that id's floor as `min_version`, and an answer older than the id's floor is
    /// read again by id. A profile this client wrote within the read-your-writes window answers
    /// a lookup of its username without a network call, unless `policy` is
    /// ``FetchPolicy/reloadFromServer``.
    ///
    /// ```swift
    /// let ada = try await client.fetch(username: "ada")
    /// for await profile in client.updates(for: ada.id) { show(profile) }  // renames included
    /// ```
    /// - Returns: the newer of the service's answer and the profile the client holds for its id.
    /// - Throws: ``ProfileClientError``: `notFound` when no profile holds the username (or its
    ///   profile was deleted); `validation` for a username that no profile can have;
    ///   `unauthorized`, `unavailable`, `transport`…
    public func fetch(username: String, policy: FetchPolicy = .useLocalWrites)
        async throws(ProfileClientError) -> Profile
    {
        let segment = try Self.pathSegment(username: username)
        let generation = await cache.generation
        let handle = Self.handle(of: username)
        if policy == .useLocalWrites, let written = await cache.writtenProfile(handle: handle) { return written }
        var path = "/users/by-username/\(segment)"
        if let id = await cache.id(holding: handle), let floor = await cache.floor(id: id) {
            path += "?min_version=\(floor)"
        }
        var redirects = 0
        while true {
            let response = try await send(method: "GET", path: path, body: nil, isRead: true)
            switch response.status {
            case 200:
                let profile = try Self.decodeProfile(response.body)
                if await cache.isBelowFloor(profile) {
                    // Older than a version of its id the client knows: read it by id, past that floor.
                    return try await fetch(id: profile.id, policy: .reloadFromServer)
                }
                return await cache.didFetch(profile, since: generation)
            case 308:
                redirects += 1
                guard redirects <= Self.maximumUsernameRedirects else {
                    throw .unexpectedStatus(308, detail: "more than \(Self.maximumUsernameRedirects) redirects")
                }
                guard let next = redirectPath(response.headers["location"]) else {
                    throw .unexpectedStatus(308, detail: "a redirect to \(response.headers["location"] ?? "nowhere")")
                }
                path = next
            case 404:
                throw .notFound
            default:
                throw Self.error(for: response)
            }
        }
    }

    /// Reads the profiles that hold `usernames` with one request per 100 usernames
    /// (`GET /users/profiles?usernames=…`), each username compared without case and asked once.
    ///
    /// A username its profile renamed away from (and still has reserved) finds that profile, and
    /// is listed in ``ProfilesByUsername/renamed`` with the profile's username now. Every profile
    /// answered reaches the observers of its id as a fetch does; one older than a version of its
    /// id the client knows is read again by id (``profiles(ids:)``), past that floor.
    /// - Throws: ``ProfileClientError``: `validation` for a username no profile can have,
    ///   `unauthorized`, `unavailable`, `transport`…; usernames no profile holds are not an error
    ///   but ``ProfilesByUsername/missing``.
    public func profiles(usernames: [String]) async throws(ProfileClientError) -> ProfilesByUsername {
        var seen = Set<String>()
        let unique = usernames.filter { seen.insert(Self.handle(of: $0)).inserted }
        var answer = ProfilesByUsername(profiles: [], missing: [])
        let generation = await cache.generation
        for chunk in unique.chunks(of: Self.maximumUsernamesPerRequest) {
            var members: [String] = []
            for username in chunk { members.append(try Self.pathSegment(username: username)) }
            let path = "/users/profiles?usernames=" + members.joined(separator: ",")
            let response = try await send(method: "GET", path: path, body: nil, isRead: true)
            guard response.status == 200 else { throw Self.error(for: response) }
            var page = try Self.decode(UsernameListBody.self, from: response.body, what: "a list").list
            // The service names missing and renamed usernames by handle: give them back as asked.
            let asked = Dictionary(chunk.map { (Self.handle(of: $0), $0) }) { first, _ in first }
            page.missing = page.missing.map { asked[Self.handle(of: $0)] ?? $0 }
            page.renamed = Dictionary(
                page.renamed.map { old, new in (asked[Self.handle(of: old)] ?? old, new) }) { _, last in last }
            try await readPastFloors(&page, asked: Array(chunk))
            for (index, profile) in page.profiles.enumerated() {
                page.profiles[index] = await cache.didFetch(profile, since: generation)
            }
            answer.profiles += page.profiles
            answer.missing += page.missing
            answer.renamed.merge(page.renamed) { _, new in new }
        }
        return answer
    }

    /// Replaces each profile of `page` that is older than a version of its id the client knows
    /// by the one ``profiles(ids:)`` reads past that floor; a profile deleted meanwhile moves its
    /// usernames (of `asked`) to the missing ones, and one renamed meanwhile updates `renamed`.
    private func readPastFloors(_ page: inout ProfilesByUsername, asked: [String]) async throws(ProfileClientError) {
        var stale: [Int64] = []
        for profile in page.profiles {
            if await cache.isBelowFloor(profile) { stale.append(profile.id) }
        }
        guard !stale.isEmpty else { return }
        let fresh = Dictionary(try await profiles(ids: stale).profiles.map { ($0.id, $0) }) { _, last in last }
        var profiles: [Profile] = []
        for profile in page.profiles {
            guard stale.contains(profile.id) else {
                profiles.append(profile)
                continue
            }
            // The usernames asked for that found this profile: its own, or one it renamed away from.
            let held = Self.handle(of: profile.username)
            let names = asked.filter { name in
                Self.handle(of: name) == held || page.renamed[name].map { Self.handle(of: $0) == held } == true
            }
            guard let current = fresh[profile.id] else {
                page.missing += names
                for name in names { page.renamed[name] = nil }
                continue
            }
            profiles.append(current)
            for name in names {
                page.renamed[name] = Self.handle(of: name) == Self.handle(of: current.username) ? nil : current.username
            }
        }
        page.profiles = profiles
    }

    private struct UsernameListBody: Decodable {
        var profiles: [Profile]
        var missing: [String]
        var renamed: [String: String]?
        var list: ProfilesByUsername {
            ProfilesByUsername(profiles: profiles, missing: missing, renamed: renamed ?? [:])
        }
    }

    /// The handle of `username`: what the service compares, its ASCII letters in lower case.
    public static func handle(of username: some StringProtocol) -> String {
        let lowered = username.utf8.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 | 0x20 : $0 }
        return String(decoding: lowered, as: UTF8.self)
    }

    /// Whether a profile can have `username`: 3 to 32 of `A-Z a-z 0-9 _ .`, as the service checks.
    public static func isUsername(_ username: some StringProtocol) -> Bool {
        (3...32).contains(username.utf8.count)
            && username.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "."):
                    true
                default: false
                }
            }
    }

    /// `username` as one segment of a path or one member of a query: percent-encoded past the
    /// unreserved characters, so whatever it holds stays in its place. The service judges what a
    /// username may be; what cannot be a segment at all (empty, `.`, `..`) is refused here.
    static func pathSegment(username: String) throws(ProfileClientError) -> String {
        guard !username.isEmpty, username != ".", username != ".." else {
            throw .validation(field: "username", detail: "no profile can have the username \"\(username)\"")
        }
        return username.addingPercentEncoding(withAllowedCharacters: unreserved) ?? username
    }

    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// The path and query of a lookup's redirect (its `Location`, relative or on the service's
    /// own origin); nil for any other place.
    private func redirectPath(_ location: String?) -> String? {
        let base = configuration.baseURL
        guard let location, let target = URL(string: location, relativeTo: base)?.absoluteURL,
            target.scheme == base.scheme, target.host == base.host, target.port == base.port,
            let components = URLComponents(url: target, resolvingAgainstBaseURL: false),
            components.percentEncodedPath.hasPrefix("/users/by-username/")
        else { return nil }
        return components.percentEncodedPath + (components.percentEncodedQuery.map { "?\($0)" } ?? "")
    }
}
