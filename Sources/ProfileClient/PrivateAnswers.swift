import Foundation

/// Which profiles of an answer are their owner's view (docs/api.md, "Fields only their owner
/// reads"): the service marks such an answer `Cache-Control: private`, and the client keeps the
/// profiles it carried out of the persisted store unless the app opts in
/// (``ProfileClientConfiguration/persistsPrivateProfiles``).
enum PrivateAnswers {
    /// The ids of the owner's views among the profiles `response` carries; none when it is not
    /// private. A single profile (a read, a write's answer, a 409's `current`) is its own id. In a
    /// list only the profile of the token's subject is the owner's view — every profile for an
    /// administrator's token, and every profile when the token says neither (the careful answer).
    static func ownerViewIDs(in response: TransportResponse, token: String?) -> [Int64] {
        guard response.headers["cache-control"]?.lowercased().contains("private") == true,
            let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any]
        else { return [] }
        if let id = (object["id"] as? NSNumber)?.int64Value { return [id] }
        if let current = object["current"] as? [String: Any], let id = (current["id"] as? NSNumber)?.int64Value { return [id] }
        let ids = (object["profiles"] as? [[String: Any]] ?? []).compactMap { ($0["id"] as? NSNumber)?.int64Value }
        return ownerViews(among: ids, token: token)
    }

    /// The ids of the owner's views among profiles an event stream opened with `token` carried.
    /// A stream is one answer for all its events, never marked private, so the token alone says:
    /// as in a private list, and none without a token (the public view). A service run with
    /// `--auth none` streams every reader the owner's view, tokenless: such a profile is kept off
    /// the disk only once a read of its id was answered private.
    static func ownerViewIDs(streamed ids: [Int64], token: String?) -> [Int64] {
        guard let token else { return [] }
        return ownerViews(among: ids, token: token)
    }

    /// The token's subject's id among `ids`, every one for an administrator's token, and every
    /// one when the token says neither (the careful answer).
    private static func ownerViews(among ids: [Int64], token: String?) -> [Int64] {
        let claims = token.flatMap(Self.claims(ofJWT:))
        if let scope = claims?["scope"] as? String, scope.split(separator: " ").contains("profiles:admin") { return ids }
        if let subject = (claims?["sub"] as? String).flatMap({ Int64($0) }) { return ids.filter { $0 == subject } }
        return ids
    }

    /// The claims of a JWT, read without verifying it (the service verifies; the client only asks
    /// whose token it sends).
    static func claims(ofJWT token: String) -> [String: Any]? {
        let parts = token.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var payload = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        payload += String(repeating: "=", count: (4 - payload.count % 4) % 4)
        guard let data = Data(base64Encoded: payload) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}
