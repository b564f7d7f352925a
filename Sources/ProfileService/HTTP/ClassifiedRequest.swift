import ProfileAuth

/// What the service makes of a request, decided once, on its event loop, when its head is
/// parsed (docs/design.md §6, ``ProfileResponder/classify(head:bodyFollows:)``): its route, and
/// what that route needs parsed of the head — a profile's id, a read's floor, a list's ids, a
/// stream's `Last-Event-ID`, the verdict on its token — so no worker parses or verifies them
/// again. A write's body is parsed once too, off the loop, by the worker that answers it.
public struct ClassifiedRequest: Sendable {
    enum Kind: Sendable {
        /// `GET` or `HEAD` of a profile (not its event stream), authorized: a batch may answer it
        /// from one multi-get.
        case read(ProfileRead)
        /// `PUT` of a profile, its token verified.
        case write(ProfileWrite)
        /// `PATCH` of a profile, its token verified and its `If-Match` read.
        case patch(ProfilePatchHead)
        /// `DELETE` of a profile, its token verified and its `If-Match` read.
        case delete(ProfileDeletion)
        /// `GET` or `HEAD` of a profile by its handle, authorized, its handle and floor parsed.
        case handleRead(HandleRead)
        /// `GET` or `HEAD` of a list of profiles, authorized, its ids parsed.
        indirect case list(ProfileListRead)
        /// `GET` or `HEAD` of a list of profiles by handle, authorized, its handles parsed.
        indirect case handleList(HandleListRead)
        /// The export of a profile (`GET /users/profile/{id}/export`), its owner's or an administrator's.
        case export(ProfileExportRead)
        /// The event stream of one profile, authorized, its id and `Last-Event-ID` parsed.
        indirect case events(ProfileStreamRead)
        /// The event stream of a list of profiles, authorized, its ids parsed.
        indirect case listEvents(ProfileListStreamRead)
        /// A route about the instance itself, which takes nothing of the head.
        case instance(InstanceRoute)
        /// Answered with a problem its head shows already: no such route (`route` nil), a method
        /// the route does not answer, several `Authorization` fields, an invalid id, floor or
        /// list, a token that may not make the request.
        indirect case refused(Problem, route: Route?)
        /// A profile write its token may not make (or with several `Authorization` fields) while
        /// tokens are checked: refused on its head when a body follows, else as ``refused``.
        indirect case unauthorizedWrite(Problem)
    }

    let kind: Kind

    /// Whether it reads a profile a batch may answer, by id or by handle (what ``BatchPolicy`` counts).
    var isProfileRead: Bool {
        switch kind {
        case .read, .handleRead: true
        default: false
        }
    }

    /// The profile read it is, if one.
    var read: ProfileRead? {
        if case .read(let read) = kind { read } else { nil }
    }

    /// The lookup by handle it is, if one.
    var handleRead: HandleRead? {
        if case .handleRead(let read) = kind { read } else { nil }
    }

    /// Whether it writes or patches a profile: its body is parsed by the worker that answers it.
    var isWrite: Bool {
        switch kind {
        case .write, .patch: true
        default: false
        }
    }
}

/// The routes about the instance itself rather than its profiles.
enum InstanceRoute: Sendable {
    case health, readiness, metrics

    var route: Route {
        switch self {
        case .health: .health
        case .readiness: .readiness
        case .metrics: .metrics
        }
    }
}

/// A profile read, as its head asks it.
struct ProfileRead: Sendable {
    let id: Int64
    /// The version the answer must not go below (``ProfileResponder/readFloor(of:)``).
    let floor: Int32?
    /// Who asks: which view the answer carries.
    let reader: ProfileReader
}

/// A lookup by handle (`GET /users/by-username/{username}`), as its head asks it.
struct HandleRead: Sendable {
    let handle: ProfileHandle
    /// The version the answer must not go below (``ProfileResponder/readFloor(of:)``).
    let floor: Int32?
    /// Who asks: which view the answer carries.
    let reader: ProfileReader
}

/// A list read by handle (`GET /users/profiles?usernames=…`): distinct handles in the order asked.
struct HandleListRead: Sendable {
    let handles: [ProfileHandle]
    /// Who asks: which view each profile of the answer carries.
    let reader: ProfileReader
}

/// A profile write (`PUT`), as its head asks it; its body is parsed by the worker that answers it.
struct ProfileWrite: Sendable {
    let id: Int64
    /// Whether the writer may set the fields only administrators write (`written_by = 'admin'`).
    let writesAdminFields: Bool
}

/// A profile patch, as its head asks it; its body is parsed by the worker that answers it.
struct ProfilePatchHead: Sendable {
    let id: Int64
    /// `If-Match`'s version: patched only at that version; nil: whatever the version.
    let expectedVersion: Int32?
    /// Whether the writer may set the fields only administrators write (`written_by = 'admin'`).
    let writesAdminFields: Bool
}

/// A profile deletion, as its head asks it.
struct ProfileDeletion: Sendable {
    let id: Int64
    /// `If-Match`'s version: deleted only at that version; nil: whatever the version.
    let expectedVersion: Int32?
}

/// A list read (`GET /users/profiles?ids=…`), as its head asks it.
struct ProfileListRead: Sendable {
    let list: ProfileListRequest
    /// Who asks: which view each profile of the answer carries.
    let reader: ProfileReader
}

/// `GET /users/profile/{id}/export`, by its owner or an administrator.
struct ProfileExportRead: Sendable {
    let id: Int64
}

/// The event stream of one profile, as its head asks it.
struct ProfileStreamRead: Sendable {
    /// `/users/profile/{id}/events`, or `/users/profile/{id}` with `Accept: text/event-stream`:
    /// what its metrics are labelled with.
    let route: Route
    let id: Int64
    /// `Last-Event-ID`: the version the client holds already; nil: none sent.
    let lastEventID: Int32?
    /// The verified token, when reads need one: it names the stream's client and bounds its life.
    let token: VerifiedToken?
    /// Who asks: which view the stream's events carry.
    let reader: ProfileReader
}

/// The event stream of a list of profiles (`GET /users/profiles/events?ids=…`), as its head asks it.
struct ProfileListStreamRead: Sendable {
    let list: ProfileListRequest
    /// The verified token, when reads need one: it names the stream's client and bounds its life.
    let token: VerifiedToken?
    /// Who asks: which view each profile's events carry.
    let reader: ProfileReader
}
