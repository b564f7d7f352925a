/// Why a ``ProfileClient`` operation failed.
///
/// Each case stands for one answer of the service (its RFC 9457 problem document decoded), or
/// for why a request got no answer (``offline``, ``timedOut``, ``tls(_:)``, ``cancelled``,
/// ``transport(_:)``), so that an app can switch over what to tell its user.
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
    /// 409: the username asked for (a creation's, or a rename's in a patch) is another profile's,
    /// or reserved for the profile that gave it up (a rename or a deletion) and may take it back.
    /// Compared without case: `Ada` and `ada` are one username.
    case usernameTaken
    /// 400, 413, 415, 422, or another 409 without a current profile: the input is refused.
    /// `field` names the offending input when the service does.
    case validation(field: String?, detail: String)
    /// 429: this client opened more than the service allows (event streams per user, requests
    /// per address); try again after `retryAfter` when the service said.
    case rateLimited(retryAfter: Duration?)
    /// 503 or 504 (after the retries reads get): try again after `retryAfter` when the service said.
    case unavailable(retryAfter: Duration?)
    /// 500, 502 or another 5xx but 503 and 504 (after the retries reads get) — what a gateway
    /// answers while an instance restarts — with `Retry-After` and the problem's `detail` when given.
    case serverError(status: Int, retryAfter: Duration?, detail: String?)
    /// The device has no network connection (no Wi-Fi or cellular data, data not allowed): say
    /// "offline", and try again when the network returns.
    case offline
    /// No answer within ``ProfileClientConfiguration/requestTimeout`` (after the retries reads get).
    case timedOut
    /// The TLS handshake failed: the server's certificate was refused (expired, wrong host, not
    /// the pinned one) or no common protocol. Not retried.
    case tls(String)
    /// The calling task was cancelled (a view went away): not a failure to show. Observers never
    /// report it.
    case cancelled
    /// The service's answer did not decode; `field` names the member at fault when known.
    case decoding(field: String?, detail: String)
    /// No answer for another reason: the service refused or lost the connection, its host was
    /// not found.
    case transport(String)
    /// The ``ProfileClientConfiguration/tokenProvider`` threw (its error, described): the request
    /// was not sent.
    case tokenUnavailable(String)
    /// Any other status, with the problem document's `detail` when there was one.
    case unexpectedStatus(Int, detail: String?)
}

extension ProfileClientError {
    /// Whether the request got no answer because of the network: no connection, none in time.
    /// A ``ProfileClient/FetchPolicy/networkFirst`` read then answers from the store.
    public var isNoAnswer: Bool {
        switch self {
        case .offline, .timedOut, .transport: true
        default: false
        }
    }
}
