import Foundation

/// The answer to ``ProfileClient/profiles(ids:)``, and each value of
/// ``ProfileClient/observeList(ids:)``: the profiles found, in the order asked (each once), and
/// the ids no profile has.
public struct ProfileList: Sendable, Hashable {
    public var profiles: [Profile]
    public var missing: [Int64]
    /// The ids whose profile in ``profiles`` is an edit of this client not confirmed yet
    /// (``ProfileEvent/pending(_:)``).
    public var pending: Set<Int64>
    /// Ids nothing is known of yet: only while following the list fails before their first
    /// value (a list opened offline), in the order asked.
    public var unknown: [Int64]
    /// Why following the list's stream fails now (``ProfileClientError/offline``, `rateLimited`,
    /// `unavailable`…); the client reconnects by itself, and the next value without it says the
    /// list is live again — nothing committed meanwhile is missed. `nil` while live.
    public var streamFailure: ProfileClientError?

    public init(
        profiles: [Profile], missing: [Int64], pending: Set<Int64> = [], unknown: [Int64] = [],
        streamFailure: ProfileClientError? = nil
    ) {
        self.profiles = profiles
        self.missing = missing
        self.pending = pending
        self.unknown = unknown
        self.streamFailure = streamFailure
    }
}

extension ProfileClient {
    /// The most ids the service answers in one list request.
    static let maximumIDsPerRequest = 100

    /// Reads several profiles with one request per 100 ids (`GET /users/profiles?ids=…`), each
    /// never older than any version this client learned of it (its floor, `id@version`): each
    /// profile returned is the newer of the answer's and the one the client holds.
    ///
    /// Every profile answered reaches the observers of its id (``events(for:)``) as a fetch does,
    /// and every id missing as ``ProfileEvent/deleted(id:)``, so a list and a detail view that
    /// show the same profile stay the same.
    /// - Throws: ``ProfileClientError``: `unauthorized`, `unavailable`, `transport`…; ids no profile
    ///   has are not an error but ``ProfileList/missing``.
    public func profiles(ids: [Int64]) async throws(ProfileClientError) -> ProfileList {
        var seen = Set<Int64>()
        let unique = ids.filter { seen.insert($0).inserted }
        var answer = ProfileList(profiles: [], missing: [])
        let generation = await cache.generation
        for chunk in unique.chunks(of: Self.maximumIDsPerRequest) {
            var members: [String] = []
            for id in chunk {
                if let floor = await cache.floor(id: id) { members.append("\(id)@\(floor)") } else { members.append("\(id)") }
            }
            let response = try await send(
                method: "GET", path: "/users/profiles?ids=" + members.joined(separator: ","), body: nil, isRead: true)
            guard response.status == 200 else { throw Self.error(for: response) }
            let page = try Self.decode(ListBody.self, from: response.body, what: "a list").list
            for profile in page.profiles { answer.profiles.append(await cache.didFetch(profile, since: generation)) }
            for id in page.missing { await cache.didLearnMissing(id: id, since: generation) }
            answer.missing += page.missing
        }
        return answer
    }

    private struct ListBody: Decodable {
        var profiles: [Profile]
        var missing: [Int64]
        var list: ProfileList { ProfileList(profiles: profiles, missing: missing) }
    }
}

extension Array {
    /// The array in consecutive slices of at most `size` elements: a list request's pages.
    func chunks(of size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
