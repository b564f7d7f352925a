import HTTP1
import ProfileAuth

/// Who reads, as far as the views of profiles go (docs/design.md §13): decided once per request,
/// when it is classified, and carried with it to every profile its answer holds.
struct ProfileReader: Sendable, Equatable {
    /// The profile the reader owns: its token's subject, when that is a profile id.
    let ownedID: Int64?
    /// Reads every profile's owner view: a holder of `profiles:admin`, or anyone under `--auth none`.
    let readsEveryOwnerView: Bool

    /// No token, or no field is owner-only: the public view of every profile.
    static let anyone = ProfileReader(ownedID: nil, readsEveryOwnerView: false)
    /// An administrator, or anyone while authentication is off (`--auth none`, where anyone may
    /// also change any profile).
    static let everyOwner = ProfileReader(ownedID: nil, readsEveryOwnerView: true)

    /// The reader a verified token makes.
    init(_ token: VerifiedToken) {
        self.init(
            ownedID: canonicalPositive(Substring(token.subject), as: Int64.self),
            readsEveryOwnerView: token.scopes.contains(VerifiedToken.adminScope))
    }

    private init(ownedID: Int64?, readsEveryOwnerView: Bool) {
        self.ownedID = ownedID
        self.readsEveryOwnerView = readsEveryOwnerView
    }

    /// The view of profile `id` an answer to this reader carries.
    func view(of id: Int64) -> ProfileView {
        readsEveryOwnerView || ownedID == id ? .owner : .anyone
    }
}

extension ProfileResponder {
    /// Who reads: the public view for everyone while no field is owner-only (nothing is verified
    /// that reads did not verify before); otherwise the token, verified when one is sent — a token
    /// that fails is 401 rather than a quiet public view, so an owner whose token expired learns
    /// it. `verified` is the token the read's authorization verified already, if any.
    func reader(of request: HTTPRequest, verified: VerifiedToken?) throws(Problem) -> ProfileReader {
        guard profileFields.hasOwnerOnlyFields else { return .anyone }
        switch authorization {
        case .disabled:
            return .everyOwner
        case .required(let verifier, _):
            if let verified { return ProfileReader(verified) }
            guard request.headers["Authorization"] != nil else { return .anyone }
            return ProfileReader(try authenticate(request, verifier: verifier))
        }
    }

    /// The headers of an answer carrying `json` in `view` (``AnswerViews``).
    static func viewHeaders(_ json: ProfileJSON, _ view: ProfileView, into headers: inout HTTPHeaders) {
        var views = AnswerViews()
        views.add(json, view)
        views.addHeaders(to: &headers)
    }
}
