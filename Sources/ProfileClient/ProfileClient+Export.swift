public import Foundation

extension ProfileClient {
    /// Everything the service keeps about profile `id` (`GET /users/profile/{id}/export`): every
    /// field, those only the owner reads included, when it was made and last changed, its version,
    /// the usernames still reserved for it, and what each field is — one JSON document, as the
    /// service sent it, for the app to hand to its user. Needs the owner's token or one with
    /// `profiles:admin`. Never stored by the client, in memory or on disk.
    /// - Throws: ``ProfileClientError``: `notFound` (no such profile, or deleted), `unauthorized`,
    ///   `forbidden`, `unavailable`, `transport`…
    public func export(id: Int64) async throws(ProfileClientError) -> Data {
        let response = try await send(method: "GET", path: "/users/profile/\(id)/export", body: nil, isRead: true)
        guard response.status == 200 else { throw Self.error(for: response) }
        return response.body
    }
}
