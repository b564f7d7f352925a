public import HTTP1

/// Every kind of problem the service answers, with its status: the `type` of a problem document
/// is `tag:profile-service,2026:<rawValue>` (stable across releases, clients switch on it).
/// `openapi.yaml` must document each; `profile-service api-contract` prints them for
/// `scripts/check-deploy.py`.
public enum ProblemKind: String, CaseIterable, Sendable {
    case invalidID = "invalid-id"
    case invalidIDs = "invalid-ids"
    case invalidUsername = "invalid-username"
    case invalidMinVersion = "invalid-min-version"
    case invalidLastEventID = "invalid-last-event-id"
    case malformedRequest = "malformed-request"
    case duplicateAuthorization = "duplicate-authorization"
    case unauthenticated
    case invalidToken = "invalid-token"
    case forbidden
    case profileNotFound = "profile-not-found"
    case noSuchRoute = "no-such-route"
    case methodNotAllowed = "method-not-allowed"
    case versionConflict = "version-conflict"
    case profileExists = "profile-exists"
    case usernameTaken = "username-taken"
    case preconditionFailed = "precondition-failed"
    case bodyTooLarge = "body-too-large"
    case unsupportedMediaType = "unsupported-media-type"
    case missingField = "missing-field"
    case invalidField = "invalid-field"
    case preconditionRequired = "precondition-required"
    case tooManyStreams = "too-many-streams"
    case internalError = "internal-error"
    case databaseUnavailable = "database-unavailable"

    /// The status every problem of this kind is answered with.
    public var status: HTTPStatus {
        switch self {
        case .invalidID, .invalidIDs, .invalidUsername, .invalidMinVersion, .invalidLastEventID, .malformedRequest, .duplicateAuthorization:
            .badRequest
        case .unauthenticated, .invalidToken: .unauthorized
        case .forbidden: .forbidden
        case .profileNotFound, .noSuchRoute: .notFound
        case .methodNotAllowed: .methodNotAllowed
        case .versionConflict, .profileExists, .usernameTaken: .conflict
        case .preconditionFailed: .preconditionFailed
        case .bodyTooLarge: .contentTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .missingField, .invalidField: .unprocessableContent
        case .preconditionRequired: .preconditionRequired
        case .tooManyStreams: .tooManyRequests
        case .internalError: .internalServerError
        case .databaseUnavailable: .serviceUnavailable
        }
    }
}
