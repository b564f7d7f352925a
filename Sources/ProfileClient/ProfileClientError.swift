/// Why a ``ProfileClient`` operation failed.
///
/// Each case stands for one answer of the service (its RFC 9457 problem document decoded), or
/// for a request that got no answer at all (``transport(_:)``).
public enum ProfileClientError: Error, Sendable, Hashable {
    /// 409: the expected version is stale, or the id exists already. `current` is the server's
    /// profile, which observers of the id have been given.
    case conflict(current: Profile)
    /// 404: no profile with this id.
    case notFound
    /// 401: the token is missing, expired or invalid.
    case unauthorized
    /// 403: the token is valid but does not allow this request.
    case forbidden
    /// 400, 413, 415, 422, or a 409 without a current profile (`username` taken): the input is
    /// refused. `field` names the offending input when the service does.
    case validation(field: String?, detail: String)
    /// 503 or 504 (after the retries reads get): try again after `retryAfter` when the service said.
    case unavailable(retryAfter: Duration?)
    /// No answer: connection refused or lost, timeout, or cancellation.
    case transport(String)
    /// The ``ProfileClientConfiguration/tokenProvider`` threw (its error, described): the request
    /// was not sent.
    case tokenUnavailable(String)
    /// Any other status, with the problem document's `detail` when there was one.
    case unexpectedStatus(Int, detail: String?)
}
