import HTTP1
import Logging
import ProfileAuth

extension ProfileResponder {
    static let realm = "profile-service"

    /// Checks a write to profile `id` before the body is read or any store is touched.
    /// - Throws: 401 without a valid token, 403 when the token is neither the owner's nor an admin's.
    func authorizeWrite(_ request: HTTPRequest, id: Int64) throws(Problem) {
        guard case .required(let verifier, _) = authorization else { return }
        let token = try authenticate(request, verifier: verifier)
        guard token.mayWrite(profileID: id) else {
            logger.notice("write refused", metadata: ["reason": "not-owner", "id": "\(id)"])
            throw Problem(
                .forbidden, detail: "only the profile's owner or a holder of \(VerifiedToken.adminScope) may change it",
                headers: [
                    "WWW-Authenticate":
                        #"Bearer realm="\#(Self.realm)", error="insufficient_scope", scope="\#(VerifiedToken.adminScope)""#
                ])
        }
    }

    /// Checks a read when `--require-auth-for-reads` is set: any valid token may read.
    /// - Returns: the verified token, when reads need one.
    @discardableResult
    func authorizeRead(_ request: HTTPRequest) throws(Problem) -> VerifiedToken? {
        guard case .required(let verifier, forReads: true) = authorization else { return nil }
        return try authenticate(request, verifier: verifier)
    }

    /// The clock-skew leeway of token expiry, when tokens are checked.
    var tokenLeeway: Duration {
        guard case .required(let verifier, _) = authorization else { return .zero }
        return verifier.configuration.leeway
    }

    /// More than one `Authorization` field is 400: whoever reads the request — this service, a
    /// gateway that reads the last field, a log — must agree on who asks. Checked once per
    /// request, when it is classified.
    static func refuseDuplicateAuthorization(_ request: HTTPRequest) throws(Problem) {
        if request.headers.count(of: "Authorization") > 1 {
            throw Problem(
                .duplicateAuthorization, detail: "send one Authorization field, not several", field: "Authorization")
        }
    }

    /// The request's token, verified (``refuseDuplicateAuthorization(_:)`` has run).
    /// - Throws: 401 for a missing or invalid token.
    private func authenticate(_ request: HTTPRequest, verifier: TokenVerifier) throws(Problem) -> VerifiedToken {
        parseCounts?.count(.token)
        do {
            return try verifier.verify(authorizationHeader: request.headers["Authorization"])
        } catch {
            // The reason is one of a fixed set of strings; the token itself is never logged or echoed.
            logger.info("unauthenticated request", metadata: ["reason": "\(error)"])
            var challenge = #"Bearer realm="\#(Self.realm)""#
            if error != .missing { challenge += #", error="invalid_token""# }
            throw Problem(
                error == .missing ? .unauthenticated : .invalidToken,
                detail: error.description, headers: ["WWW-Authenticate": challenge])
        }
    }
}
