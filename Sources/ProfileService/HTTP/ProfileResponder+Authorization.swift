import HTTP1
import Logging
import ProfileAuth

extension ProfileResponder {
    static let realm = "profile-service"

    /// Checks a write to profile `id` before the body is read or any store is touched.
    /// - Returns: whether the writer may set the fields only administrators write (an
    ///   administrator's token, or `--auth none`).
    /// - Throws: 401 without a valid token, 403 when the token is neither the owner's nor an admin's.
    @discardableResult
    func authorizeWrite(_ request: HTTPRequest, id: Int64) throws(Problem) -> Bool {
        guard case .required(let verifier, _) = authorization else { return true }
        let token = try authenticate(request, verifier: verifier)
        try requireOwner(token, of: id, to: "change it")
        return token.scopes.contains(VerifiedToken.adminScope)
    }

    /// Checks an export of profile `id`: the owner's or an administrator's, as a write (with
    /// `--auth none`, anyone's, as any write).
    /// - Throws: 401 without a valid token, 403 when the token is neither the owner's nor an admin's.
    func authorizeExport(_ request: HTTPRequest, id: Int64) throws(Problem) {
        guard case .required(let verifier, _) = authorization else { return }
        try requireOwner(try authenticate(request, verifier: verifier), of: id, to: "export it")
    }

    /// 403 unless `token` is profile `id`'s owner's or an administrator's.
    private func requireOwner(_ token: VerifiedToken, of id: Int64, to action: String) throws(Problem) {
        guard !token.mayWrite(profileID: id) else { return }
        logger.notice("request refused", metadata: ["reason": "not-owner", "id": "\(id)"])
        throw Problem(
            .forbidden, detail: "only the profile's owner or a holder of \(VerifiedToken.adminScope) may \(action)",
            headers: [
                "WWW-Authenticate":
                    #"Bearer realm="\#(Self.realm)", error="insufficient_scope", scope="\#(VerifiedToken.adminScope)""#
            ])
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
    func authenticate(_ request: HTTPRequest, verifier: TokenVerifier) throws(Problem) -> VerifiedToken {
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
