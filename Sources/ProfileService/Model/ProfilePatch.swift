/// A validated `PATCH /users/profile/{id}` body: a JSON Merge Patch (RFC 7396) of the profile's
/// fields — each member present is set, every other field is left as it is.
///
/// A patch may change `display_name`, `username` (a rename, docs/design.md §12) and every
/// declared field (``ProfileFieldCatalog``); `version` is the service's (send the version a patch expects as
/// `If-Match`). A member the profile does not have is refused (422, naming it) rather than
/// ignored: a client that sends a field must learn that it was not stored. `null` removes a
/// member in a merge patch: it unsets a declared field, and the display name cannot be removed
/// (422). `{}` changes nothing: the answer is the profile as it is, at its version.
enum ProfilePatch {
    static func parse(body: [UInt8], catalog: ProfileFieldCatalog) throws(ProfileRequestError) -> ProfileChanges {
        let fields = try ProfileWriteRequest.decodeFields(body, catalog: catalog)
        if fields.removesDisplayName { throw .invalidField("display_name", "cannot be removed") }
        if fields.version != nil {
            throw .invalidField("version", "is not patched: send the version the patch expects as If-Match")
        }
        return ProfileChanges(
            displayName: try fields.displayName.map { (raw) throws(ProfileRequestError) in try ProfileValidation.validDisplayName(raw) },
            fields: try ProfileWriteRequest.declaredFields(of: fields, catalog: catalog, ignoring: []),
            username: try fields.username.map { (raw) throws(ProfileRequestError) in try ProfileValidation.validUsername(raw) })
    }
}
