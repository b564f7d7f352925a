public import HTTP1

/// An RFC 9457 problem document, the body of every error answer.
///
/// `type` is a tag URI (RFC 4151) per kind of problem (``ProblemKind``), stable across
/// releases, so clients can switch on it; `title` is the HTTP reason; `detail` says what to
/// change. `field` names the offending input and `current` carries the current profile where
/// that helps the client (409).
public struct Problem: Error, Sendable {
    public var kind: ProblemKind
    public var detail: String
    public var field: String?
    public var current: Profile?
    public var headers: HTTPHeaders

    /// The kind's status.
    public var status: HTTPStatus { kind.status }

    public init(
        _ kind: ProblemKind, detail: String, field: String? = nil, current: Profile? = nil, headers: HTTPHeaders = [:]
    ) {
        self.kind = kind
        self.detail = detail
        self.field = field
        self.current = current
        self.headers = headers
    }

    public var typeURI: String { "tag:profile-service,2026:\(kind.rawValue)" }

    public var response: HTTPResponse {
        var json = JSONWriter(capacity: 256)
        json.beginObject()
        json.key("type"); json.string(typeURI)
        json.key("title"); json.string(status.reasonPhrase)
        json.key("status"); json.integer(Int64(status.code))
        json.key("detail"); json.string(detail)
        if let field { json.key("field"); json.string(field) }
        // Only a write's problem carries the profile, and its writer is the owner or an administrator.
        if let current { json.key("current"); json.raw(current.ownerJSON) }
        json.endObject()
        var headers = self.headers
        headers.replaceOrAdd(name: "Content-Type", value: "application/problem+json")
        if let current {
            headers.replaceOrAdd(name: "ETag", value: current.entityTag(.owner))
            ProfileResponder.viewHeaders(current.json, .owner, into: &headers)
        }
        return HTTPResponse(status: status, headers: headers, body: json.bytes)
    }
}

extension Problem {
    static func notFound(_ id: Int64) -> Problem {
        Problem(.profileNotFound, detail: "no profile with id \(id)")
    }

    static func notFound(_ handle: ProfileHandle) -> Problem {
        Problem(.profileNotFound, detail: "no profile has the username \(handle)")
    }

    static func databaseUnavailable() -> Problem {
        Problem(
            .databaseUnavailable, detail: "the profile database is unavailable; retry shortly",
            headers: ["Retry-After": "1"])
    }

    static func internalError() -> Problem {
        Problem(.internalError, detail: "the request failed unexpectedly")
    }
}
