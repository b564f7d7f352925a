public import HTTP1
public import HTTPServer
import Synchronization

/// What the service makes of a request, decided once, on its event loop, when its head is
/// parsed (docs/design.md §6): its route, and what that route needs parsed of the head — a
/// profile's id, a read's floor, the verdict on a write's token — so no worker parses or
/// verifies them again. A write's body is parsed once too, later: by the batch that groups it
/// with others, or by the route.
public struct ClassifiedRequest: Sendable {
    enum Kind: Sendable {
        /// `GET` or `HEAD` of a profile (not its event stream), authorized: a batch may answer it
        /// from one multi-get.
        case read(ProfileRead)
        /// `PUT` of a profile, its token verified.
        indirect case write(ProfileWrite)
        /// `PATCH` of a profile, its token verified and its `If-Match` read.
        indirect case patch(ProfilePatchHead)
        /// `DELETE` of a profile, its token verified and its `If-Match` read.
        case delete(ProfileDeletion)
        /// Any other route, answered by it as it stands: lists, event streams, health,
        /// readiness, metrics.
        case route(Route)
        /// Answered with a problem its head shows already: no such route (`route` nil), a method
        /// the route does not answer, several `Authorization` fields, an invalid id or floor, a
        /// token that may not make the request.
        indirect case refused(Problem, route: Route?)
        /// A profile write its token may not make (or with several `Authorization` fields) while
        /// tokens are checked: refused on its head when a body follows, else as ``refused``.
        indirect case unauthorizedWrite(Problem)
    }

    let kind: Kind

    /// Whether it reads a profile a batch may answer (what ``BatchPolicy`` counts).
    var isProfileRead: Bool {
        if case .read = kind { true } else { false }
    }
}

/// What a batch learned for one of its requests, handed to the code that answers it.
enum BatchedAnswer {
    case read(ProfileRepository.BatchedRead)
    case write(ProfileRepository.WrittenTogether)
}

/// A profile read, as its head asks it.
struct ProfileRead: Sendable {
    let id: Int64
    /// The version the answer must not go below (``ProfileResponder/readFloor(of:)``).
    let floor: Int32?
}

/// A profile write, as its head asks it; its body once parsed.
struct ProfileWrite: Sendable {
    let id: Int64
    /// The body's write, or why it is refused; nil until parsed.
    var parsed: Result<ProfileWriteRequest, Problem>?

    /// The update it asks for, when it is one (a creation, or a refused body, is not).
    var update: ProfileUpdate? {
        guard case .success(.update(let changes, let expectedVersion))? = parsed else { return nil }
        return ProfileUpdate(id: id, changes: changes, expectedVersion: expectedVersion)
    }
}

/// A profile patch, as its head asks it; its body once parsed.
struct ProfilePatchHead: Sendable {
    let id: Int64
    /// `If-Match`'s version: patched only at that version; nil: whatever the version.
    let expectedVersion: Int32?
    /// The body's changes, or why it is refused; nil until parsed.
    var parsed: Result<ProfileChanges, Problem>?

    init(id: Int64, expectedVersion: Int32?) {
        self.id = id
        self.expectedVersion = expectedVersion
    }

    /// The update it asks for, once its body parsed (`{}` asks for none).
    var update: ProfileUpdate? {
        guard case .success(let changes)? = parsed, !changes.isEmpty else { return nil }
        return ProfileUpdate(id: id, changes: changes, expectedVersion: expectedVersion)
    }
}

/// A profile deletion, as its head asks it.
struct ProfileDeletion: Sendable {
    let id: Int64
    /// `If-Match`'s version: deleted only at that version; nil: whatever the version.
    let expectedVersion: Int32?
}

/// How often the request path parsed what a classified request carries: what a unit test counts
/// to show that it is parsed once. Off (nil) in production: shared counters would be written by
/// every loop and worker.
public final class ParseCounts: Sendable {
    enum Item {
        case path, floor, body, token
    }

    private let pathCount = Atomic<Int>(0)
    private let floorCount = Atomic<Int>(0)
    private let bodyCount = Atomic<Int>(0)
    private let tokenCount = Atomic<Int>(0)

    public init() {}

    /// Profile ids parsed from a path.
    public var paths: Int { pathCount.load(ordering: .relaxed) }
    /// Floors (`min_version`, `If-None-Match`) parsed.
    public var floors: Int { floorCount.load(ordering: .relaxed) }
    /// Write bodies parsed.
    public var bodies: Int { bodyCount.load(ordering: .relaxed) }
    /// Tokens verified.
    public var tokens: Int { tokenCount.load(ordering: .relaxed) }

    func count(_ item: Item) {
        switch item {
        case .path: pathCount.add(1, ordering: .relaxed)
        case .floor: floorCount.add(1, ordering: .relaxed)
        case .body: bodyCount.add(1, ordering: .relaxed)
        case .token: tokenCount.add(1, ordering: .relaxed)
        }
    }
}

extension ProfileResponder {
    /// Classifies a request on its event loop (``HTTPServer/HTTPResponder/classify(head:bodyFollows:)``).
    /// Reads, writes and patches of profiles go to the batch lane. A write whose token may not make it is
    /// refused on its head when a body follows — no `100 Continue`, no body read or buffered —
    /// and counted in `profile_service_http_requests_refused_before_body_total`.
    public func classify(head: HTTPRequest, bodyFollows: Bool) -> RequestClassification<ClassifiedRequest> {
        let kind = classify(head)
        switch kind {
        case .read, .write, .patch:
            return .accept(ClassifiedRequest(kind: kind), toBatchLane: true)
        case .delete:
            return .accept(ClassifiedRequest(kind: kind), toBatchLane: false)
        case .unauthorizedWrite(let problem) where bodyFollows:
            observability.metrics.recordRefusedBeforeBody()
            var response = problem.response
            response.headers.replaceOrAdd(name: "X-Request-ID", value: RequestID.accepting(head.headers["X-Request-ID"]))
            return .refuse(response)
        case .route, .refused, .unauthorizedWrite:
            return .accept(ClassifiedRequest(kind: kind), toBatchLane: false)
        }
    }

    /// What a write's head would be answered before its body is read: the refusal of
    /// ``classify(head:bodyFollows:)``, or nil when the body is to be read.
    public func screen(head: HTTPRequest) -> HTTPResponse? {
        if case .refuse(let response) = classify(head: head, bodyFollows: true) { return response }
        return nil
    }

    private func classify(_ head: HTTPRequest) -> ClassifiedRequest.Kind {
        let path = head.path
        guard let route = Route(path: path), route != .metrics || observability.renderMetrics != nil else {
            return .refused(Problem(.noSuchRoute, detail: "no route for \(path.prefix(200))"), route: nil)
        }
        guard route.answers(head.method) else {
            return .refused(Self.methodNotAllowedProblem(route), route: route)
        }
        if route == .profile, head.method == .put || head.method == .patch || head.method == .delete {
            return classifyChange(head)
        }
        do throws(Problem) {
            try Self.refuseDuplicateAuthorization(head)
            guard route == .profile, !(head.method == .get && Self.acceptsEventStream(head)) else { return .route(route) }
            try authorizeRead(head)
            return .read(ProfileRead(id: try profileID(from: path), floor: try readFloor(of: head)))
        } catch {
            return .refused(error, route: route)
        }
    }

    /// A `PUT`, `PATCH` or `DELETE` of a profile: its id, who may make it, then (`PATCH`, `DELETE`)
    /// its `If-Match`. A change to no valid id reads its body and is 400 (or 404) after it.
    private func classifyChange(_ head: HTTPRequest) -> ClassifiedRequest.Kind {
        let id = Result { () throws(Problem) in try profileID(from: head.path) }
        do throws(Problem) {
            try Self.refuseDuplicateAuthorization(head)
        } catch {
            // Refused on its head only where a token is checked for a valid id.
            if case .success = id, case .required = authorization { return .unauthorizedWrite(error) }
            return .refused(error, route: .profile)
        }
        let changedID: Int64
        switch id {
        case .success(let value): changedID = value
        case .failure(let error): return .refused(error, route: .profile)
        }
        do throws(Problem) {
            try authorizeWrite(head, id: changedID)
        } catch {
            return .unauthorizedWrite(error)
        }
        guard head.method != .put else { return .write(ProfileWrite(id: changedID)) }
        let expectedVersion: Int32?
        do throws(ProfileRequestError) {
            expectedVersion = try Self.ifMatchVersion(head.headers["If-Match"])
        } catch {
            return .refused(error.problem, route: .profile)
        }
        return head.method == .patch
            ? .patch(ProfilePatchHead(id: changedID, expectedVersion: expectedVersion))
            : .delete(ProfileDeletion(id: changedID, expectedVersion: expectedVersion))
    }

    // MARK: Parsing, counted

    func profileID(from path: String) throws(Problem) -> Int64 {
        parseCounts?.count(.path)
        return try Self.profileID(from: path)
    }

    func readFloor(of request: HTTPRequest) throws(Problem) -> Int32? {
        parseCounts?.count(.floor)
        return try Self.readFloor(of: request)
    }

    /// Parses a patch's body, once: what the batch that grouped it parsed, else now.
    func parsedPatch(_ patch: inout ProfilePatchHead, of request: HTTPRequest) -> Result<ProfileChanges, Problem> {
        parsedOnce(&patch.parsed) { () throws(Problem) in try Self.patchChanges(of: request, profileFields: profileFields) }
    }

    /// Parses a write's body, once: what the batch that grouped it parsed, else now.
    func parsedWrite(_ write: inout ProfileWrite, of request: HTTPRequest) -> Result<ProfileWriteRequest, Problem> {
        let id = write.id
        return parsedOnce(&write.parsed) { () throws(Problem) in try Self.writeRequest(of: request, id: id, profileFields: profileFields) }
    }

    /// What `stored` holds, else what `parse` finds, counted and kept in `stored`.
    private func parsedOnce<Parsed>(
        _ stored: inout Result<Parsed, Problem>?, _ parse: () throws(Problem) -> Parsed
    ) -> Result<Parsed, Problem> {
        if let stored { return stored }
        parseCounts?.count(.body)
        let parsed = Result { () throws(Problem) in try parse() }
        stored = parsed
        return parsed
    }
}
