import Foundation

/// A validated `PATCH /users/profile/{id}` body: a JSON Merge Patch (RFC 7396) of the profile's
/// fields — each member present is set, every other field is left as it is.
///
/// The profile has one field a patch may change, `display_name`; `username` never changes and
/// `version` is the service's (send the version a patch expects as `If-Match`). A member the
/// profile does not have is refused (422, naming it) rather than ignored: a client that sends a
/// field must learn that it was not stored. `null` removes a member in a merge patch, and no
/// field of a profile may be removed (422).
struct ProfilePatch: Equatable, Sendable {
    var displayName: String

    static func parse(body: [UInt8]) throws(ProfileRequestError) -> ProfilePatch {
        guard !body.isEmpty else { throw .malformed(field: nil, "the request needs a JSON object body") }
        let structure = ProfileWriteRequest.Structure(scanning: body)
        guard !structure.hasTrailingComma, structure.deepestNesting <= ProfileWriteRequest.maximumNestingDepth,
            let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        else { throw .malformed(field: nil, "the body is not a valid JSON object") }
        var displayName: String?
        for (name, value) in object.sorted(by: { $0.key < $1.key }) {
            switch name {
            case "display_name":
                if value is NSNull { throw .invalidField("display_name", "cannot be removed") }
                guard let text = value as? String else {
                    throw .malformed(field: "display_name", "display_name has the wrong type or value")
                }
                displayName = try ProfileValidation.validDisplayName(text)
            case "username":
                throw .invalidField("username", "cannot be changed")
            case "version":
                throw .invalidField("version", "is not patched: send the version the patch expects as If-Match")
            default:
                throw .invalidField(String(name.prefix(64)), "is not a field of a profile")
            }
        }
        guard let displayName else { throw .missingField("display_name") }
        return ProfilePatch(displayName: displayName)
    }
}
