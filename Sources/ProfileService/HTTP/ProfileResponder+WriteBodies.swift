import HTTP1
import ProfileAuth

/// A profile write or patch with its body parsed: what the worker that answers the request
/// makes of it, alone or together with the other writes of its group.
enum ParsedWrite {
    /// A `PUT`: its write (an update or a creation), or why its body is refused.
    case put(ProfileWrite, Result<ProfileWriteRequest, Problem>)
    /// A `PATCH`: its changes, or why its body is refused.
    case patch(ProfilePatchHead, Result<ProfileChanges, Problem>)

    /// The update it asks for, when it is one: not a creation, a refused body, or `{}`.
    var update: ProfileUpdate? {
        switch self {
        case .put(let write, .success(.update(let changes, let expectedVersion))):
            ProfileUpdate(id: write.id, changes: changes, expectedVersion: expectedVersion)
        case .patch(let patch, .success(let changes)) where !changes.isEmpty:
            ProfileUpdate(id: patch.id, changes: changes, expectedVersion: patch.expectedVersion)
        default:
            nil
        }
    }
}

extension ProfileResponder {
    // The one place a write's body is parsed: by the worker that answers the request, once.

    /// A `PUT` with its body parsed.
    func parsedWrite(_ write: ProfileWrite, _ request: HTTPRequest) -> ParsedWrite {
        parseCounts?.count(.body)
        return .put(
            write,
            Result { () throws(Problem) in
                let parsed = try Self.writeRequest(of: request, id: write.id, profileFields: profileFields)
                switch parsed {
                case .update(let changes, _): try refuseAdminFields(changes.fields, unless: write.writesAdminFields)
                case .create(_, _, let fields): try refuseAdminFields(fields, unless: write.writesAdminFields)
                }
                return parsed
            })
    }

    /// A `PATCH` with its body parsed.
    func parsedWrite(_ patch: ProfilePatchHead, _ request: HTTPRequest) -> ParsedWrite {
        parseCounts?.count(.body)
        return .patch(
            patch,
            Result { () throws(Problem) in
                let changes = try Self.patchChanges(of: request, profileFields: profileFields)
                try refuseAdminFields(changes.fields, unless: patch.writesAdminFields)
                return changes
            })
    }

    /// 403 naming the first field of `fields` that only administrators write (`written_by =
    /// 'admin'`), unless the writer is one. Named with any value, `null` included: a body that
    /// names such a field is refused whole, so an owner's write never half-happens.
    private func refuseAdminFields(_ fields: [ProfileFields.Entry], unless writesAdminFields: Bool) throws(Problem) {
        guard !writesAdminFields, profileFields.hasAdminWrittenFields else { return }
        for field in fields where profileFields.declaration(named: field.name)?.writtenBy == .admin {
            throw Problem(
                .forbidden, detail: "only a holder of \(VerifiedToken.adminScope) may set \(field.name); leave it out of the body",
                field: field.name)
        }
    }

    /// The write a `PUT` of profile `id` asks for by its headers and body (authorization aside).
    static func writeRequest(of request: HTTPRequest, id: Int64, profileFields: ProfileFieldCatalog) throws(Problem)
        -> ProfileWriteRequest
    {
        try acceptBody(of: request, as: "a profile write", mediaType: "application/json", profileFields: profileFields)
        do {
            return try ProfileWriteRequest.parse(
                body: request.body,
                ifMatchVersion: try ifMatchVersion(request.headers["If-Match"]),
                ifNoneMatchAny: try ifNoneMatchAny(request.headers["If-None-Match"]), catalog: profileFields, id: id)
        } catch {
            throw error.problem
        }
    }

    /// The changes a `PATCH`'s headers and body ask for (its id, `If-Match` and authorization aside).
    static func patchChanges(of request: HTTPRequest, profileFields: ProfileFieldCatalog) throws(Problem) -> ProfileChanges {
        try acceptBody(of: request, as: "a profile patch", mediaType: "application/merge-patch+json", profileFields: profileFields)
        do {
            return try ProfilePatch.parse(body: request.body, catalog: profileFields)
        } catch {
            throw error.problem
        }
    }

    /// A JSON body (415 otherwise, naming `mediaType`) within the size of a profile write under
    /// the declared fields (413). The only check of that size: the server's limit
    /// (``maximumRequestBodyBytes``) bounds every body by the largest declarations any catalog
    /// may have, and the parsers take what this lets through.
    private static func acceptBody(
        of request: HTTPRequest, as what: String, mediaType: String, profileFields: ProfileFieldCatalog
    ) throws(Problem) {
        if let contentType = request.headers["Content-Type"], !isJSON(contentType) {
            throw Problem(.unsupportedMediaType, detail: "send the body as \(mediaType)")
        }
        if request.body.count > profileFields.maximumWriteBodyBytes {
            throw Problem(.bodyTooLarge, detail: "\(what) is at most \(profileFields.maximumWriteBodyBytes) bytes")
        }
    }

    /// `application/json` or a `+json` type that is a JSON object of the profile's members: not
    /// `application/json-patch+json`, whose document is a list of operations (RFC 6902) that a
    /// merge patch would misread.
    static func isJSON(_ contentType: String) -> Bool {
        if contentType == "application/json" { return true }  // what clients send, without the parsing
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmed.lowercased() } ?? ""
        guard mediaType != "application/json-patch+json" else { return false }
        return mediaType == "application/json" || (mediaType.hasPrefix("application/") && mediaType.hasSuffix("+json"))
    }
}
