public import HTTP1
public import HTTPServer

extension ProfileResponder {
    /// Classifies a request on its event loop (``HTTPServer/HTTPResponder/classify(head:bodyFollows:)``):
    /// everything a route needs of the head is parsed and its token verified here, once
    /// (``ClassifiedRequest``). Reads, writes and patches of profiles go to the batch lane. A write
    /// whose token may not make it is refused on its head when a body follows — no `100 Continue`,
    /// no body read or buffered — and counted in `profile_service_http_requests_refused_before_body_total`.
    public func classify(head: HTTPRequest, bodyFollows: Bool) -> RequestClassification<ClassifiedRequest> {
        let kind = classify(head)
        switch kind {
        case .read, .handleRead, .write, .patch:
            return .accept(ClassifiedRequest(kind: kind), toBatchLane: true)
        case .unauthorizedWrite(let problem) where bodyFollows:
            observability.metrics.recordRefusedBeforeBody()
            var response = problem.response
            response.headers.replaceOrAdd(name: "X-Request-ID", value: RequestID.accepting(head.headers["X-Request-ID"]))
            return .refuse(response)
        case .delete, .list, .handleList, .export, .events, .listEvents, .instance, .refused, .unauthorizedWrite:
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
            switch route {
            case .profile where head.method == .get && Self.acceptsEventStream(head):
                return .events(try streamRead(head, route: route, profilePath: path))
            case .profileEvents:
                return .events(try streamRead(head, route: route, profilePath: String(path.dropLast(Self.eventsSuffix.count))))
            case .profileExport:
                let id = try profileID(from: String(path.dropLast(Self.exportSuffix.count)))
                try authorizeExport(head, id: id)
                return .export(ProfileExportRead(id: id))
            case .profile:
                let reader = try reader(of: head, verified: try authorizeRead(head))
                return .read(ProfileRead(id: try profileID(from: path), floor: try readFloor(of: head), reader: reader))
            case .profileByUsername:
                let reader = try reader(of: head, verified: try authorizeRead(head))
                return .handleRead(HandleRead(handle: try Self.handle(from: path), floor: try readFloor(of: head), reader: reader))
            case .profiles where head.queryValue(for: "usernames") != nil:
                let reader = try reader(of: head, verified: try authorizeRead(head))
                return .handleList(HandleListRead(handles: try Self.handles(of: head), reader: reader))
            case .profiles:
                let reader = try reader(of: head, verified: try authorizeRead(head))
                return .list(ProfileListRead(list: try list(of: head, maximumIDs: ProfileListRequest.maximumIDs), reader: reader))
            case .profilesEvents:
                let token = try authorizeRead(head)
                let reader = try reader(of: head, verified: token)
                return .listEvents(
                    ProfileListStreamRead(
                        list: try list(of: head, maximumIDs: ProfileListRequest.maximumStreamIDs), token: token, reader: reader))
            case .health: return .instance(.health)
            case .readiness: return .instance(.readiness)
            case .metrics: return .instance(.metrics)
            }
        } catch {
            return .refused(error, route: route)
        }
    }

    /// A profile's event stream: who may read it, then its id and `Last-Event-ID`, in the order
    /// their problems are answered.
    private func streamRead(_ head: HTTPRequest, route: Route, profilePath: String) throws(Problem) -> ProfileStreamRead {
        let token = try authorizeRead(head)
        let reader = try reader(of: head, verified: token)
        let id = try profileID(from: profilePath)
        return ProfileStreamRead(route: route, id: id, lastEventID: try lastEventID(of: head), token: token, reader: reader)
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
        let writesAdminFields: Bool
        do throws(Problem) {
            writesAdminFields = try authorizeWrite(head, id: changedID)
        } catch {
            return .unauthorizedWrite(error)
        }
        guard head.method != .put else { return .write(ProfileWrite(id: changedID, writesAdminFields: writesAdminFields)) }
        let expectedVersion: Int32?
        do throws(ProfileRequestError) {
            expectedVersion = try Self.ifMatchVersion(head.headers["If-Match"])
        } catch {
            return .refused(error.problem, route: .profile)
        }
        return head.method == .patch
            ? .patch(ProfilePatchHead(id: changedID, expectedVersion: expectedVersion, writesAdminFields: writesAdminFields))
            : .delete(ProfileDeletion(id: changedID, expectedVersion: expectedVersion))
    }

    // MARK: Parsing, counted

    private func profileID(from path: String) throws(Problem) -> Int64 {
        parseCounts?.count(.path)
        return try Self.profileID(from: path)
    }

    private func readFloor(of request: HTTPRequest) throws(Problem) -> Int32? {
        parseCounts?.count(.floor)
        return try Self.readFloor(of: request)
    }

    private func lastEventID(of request: HTTPRequest) throws(Problem) -> Int32? {
        parseCounts?.count(.floor)
        return try Self.lastEventID(request.headers["Last-Event-ID"])
    }

    private func list(of request: HTTPRequest, maximumIDs: Int) throws(Problem) -> ProfileListRequest {
        parseCounts?.count(.list)
        return try Self.listRequest(request, maximumIDs: maximumIDs)
    }
}
