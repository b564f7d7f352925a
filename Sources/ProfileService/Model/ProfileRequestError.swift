import HTTP1

/// Why a request's input was refused. Nothing has been written when one is thrown.
public enum ProfileRequestError: Error, Sendable, Equatable {
    /// The body is not JSON, not an object, or a field has the wrong JSON type (400).
    case malformed(field: String?, String)
    /// A required field is absent (422).
    case missingField(String)
    /// A field is present but breaks a rule (422).
    case invalidField(String, String)
    /// The request's preconditions cannot all hold, whatever the stored profile (412);
    /// `field` names the header that contradicts the rest.
    case preconditionFailed(field: String, String)
    /// An update that says no version it expects (428): updates are always optimistic.
    case preconditionRequired(String)

    var problem: Problem {
        switch self {
        case .malformed(let field, let detail):
            Problem(.malformedRequest, detail: detail, field: field)
        case .missingField(let field):
            Problem(.missingField, detail: "\(field) is required", field: field)
        case .invalidField(let field, let rule):
            Problem(.invalidField, detail: "\(field) \(rule)", field: field)
        case .preconditionFailed(let field, let detail):
            Problem(.preconditionFailed, detail: detail, field: field)
        case .preconditionRequired(let detail):
            Problem(.preconditionRequired, detail: detail, field: "version")
        }
    }
}
