import HTTP1

/// Lookups by handle (docs/design.md §12): `GET /users/by-username/{username}` and
/// `GET /users/profiles?usernames=…`.
extension ProfileResponder {
    /// `GET /users/by-username/{username}[?min_version=N]`, honouring `If-None-Match`: the profile
    /// that holds the handle, answered as `GET /users/profile/{id}` answers it, with
    /// `Content-Location` naming it by id; `308` to the new handle of a profile that renamed away
    /// (the query kept, so a floor follows the redirect); 404 when no profile holds it. `found` is
    /// what its batch found for it in memcached, if that decided it.
    func getProfile(
        _ read: HandleRead, _ request: HTTPRequest, worker: ProfileWorker, found: ProfileRepository.HandleAnswer?
    ) throws(Problem) -> HTTPResponse {
        let answer: ProfileRepository.HandleAnswer
        if let found {
            answer = found
        } else {
            do {
                answer = try worker.repository.lookUp(read.handle, minVersion: read.floor)
            } catch {
                throw Self.problem(for: error)
            }
        }
        switch answer {
        case .profile(let id, let representation):
            var response = Self.readResponse(representation, request, view: read.reader.view(of: id))
            response.headers.add(name: "Content-Location", value: Self.profilePathPrefix + String(id))
            return response
        case .moved(_, let username):
            let location = Route.usernamePathPrefix + username + (request.query.map { "?" + $0 } ?? "")
            return HTTPResponse(status: .permanentRedirect, headers: ["Location": location, "Cache-Control": "no-cache"])
        case .nobody:
            throw Problem.notFound(read.handle)
        }
    }

    /// `GET /users/profiles?usernames=ada,bob` (and `HEAD`): the profiles that hold or kept the
    /// handles, in the order asked, each once; the handles no profile holds in `missing`; each
    /// handle kept by a profile that renamed away in `renamed`, with its new username. The
    /// `ETag` is the id list's for the profiles answered, so `If-None-Match` is 304 as there.
    func getProfiles(_ read: HandleListRead, _ request: HTTPRequest, worker: ProfileWorker) throws(Problem) -> HTTPResponse {
        let answers: [ProfileHandle: ProfileRepository.HandleAnswer]
        do {
            answers = try worker.repository.lookUp(read.handles.map { ($0, nil) })
        } catch {
            throw Self.problem(for: error)
        }
        // The profiles of moved handles are read by id, as one list after the lookups.
        var movedIDs: [Int64] = []
        for case .moved(let id, _)? in read.handles.map({ answers[$0] }) { movedIDs.append(id) }
        var moved: [Int64: ProfileRepository.Representation] = [:]
        if !movedIDs.isEmpty {
            let list = ProfileListRequest(mentions: movedIDs.map { ProfileListRequest.Member(id: $0) })
            do {
                for (member, answer) in zip(list.members, try worker.repository.read(list)) { moved[member.id] = answer }
            } catch {
                throw Self.problem(for: error)
            }
        }

        var profiles = JSONArrayBuilder()
        var missing = JSONArrayBuilder()
        var renamed: [(String, String)] = []
        var answered: Set<Int64> = []
        var tag = ListEntityTag()
        var views = AnswerViews()
        func append(_ id: Int64, _ representation: ProfileRepository.Representation) {
            let view = read.reader.view(of: id)
            tag.add(id: id, version: representation.version, view: view)
            views.add(representation.json, view)
            profiles.append(raw: representation.json.view(view))
        }
        for handle in read.handles {
            switch answers[handle] ?? .nobody {
            case .profile(let id, let representation):
                if answered.insert(id).inserted { append(id, representation) }
            case .moved(let id, let username):
                renamed.append((handle.key, username))
                if let representation = moved[id], answered.insert(id).inserted { append(id, representation) }
            case .nobody:
                tag.add(id: 0, version: 0)
                missing.append(raw: Array("\"\(handle.key)\"".utf8))
            }
        }
        var body = Array(#"{"profiles":"#.utf8) + profiles.closed + Array(#","missing":"#.utf8) + missing.closed
        body += Array(#","renamed":{"#.utf8)
        body += Array(renamed.map { "\"\($0.0)\":\"\($0.1)\"" }.joined(separator: ",").utf8)
        body += Array("}}".utf8)

        var headers: HTTPHeaders = ["ETag": tag.value, "Cache-Control": "no-cache"]
        views.addHeaders(to: &headers)
        if let condition = request.headers["If-None-Match"], Self.entityTags(condition, contain: tag.value) {
            return HTTPResponse(status: .notModified, headers: headers)
        }
        headers.add(name: "Content-Type", value: "application/json")
        return HTTPResponse(status: .ok, headers: headers, body: body)
    }

    // MARK: Input

    /// The handle of a lookup's path: a username's, 400 `invalid-username` for anything that
    /// cannot be one.
    static func handle(from path: String) throws(Problem) -> ProfileHandle {
        let text = path.dropFirst(Route.usernamePathPrefix.count)
        if text.isEmpty || text.contains("/") { throw Problem(.noSuchRoute, detail: "no route for \(path.prefix(200))") }
        guard let handle = ProfileHandle(username: text) else { throw invalidUsername(field: "username") }
        return handle
    }

    /// The distinct handles of `usernames=ada,bob` in the order asked: at most
    /// ``ProfileListRequest/maximumIDs`` names (repetitions included), each a username.
    static func handles(of request: HTTPRequest) throws(Problem) -> [ProfileHandle] {
        if request.queryValue(for: "ids") != nil {
            throw Problem(.invalidUsername, detail: "name the profiles by ids or by usernames, not both", field: "usernames")
        }
        let names = (request.queryValue(for: "usernames") ?? "").split(separator: ",", omittingEmptySubsequences: false)
        guard names.count <= ProfileListRequest.maximumIDs else {
            throw Problem(
                .invalidUsername, detail: "usernames names \(names.count) profiles; at most \(ProfileListRequest.maximumIDs) are allowed",
                field: "usernames")
        }
        var handles: [ProfileHandle] = []
        var seen: Set<ProfileHandle> = []
        for name in names {
            guard let handle = ProfileHandle(username: name) else { throw invalidUsername(field: "usernames") }
            if seen.insert(handle).inserted { handles.append(handle) }
        }
        return handles
    }

    private static func invalidUsername(field: String) -> Problem {
        Problem(.invalidUsername, detail: "a username is 3 to 32 characters of A-Z, a-z, 0-9, '_' and '.'", field: field)
    }
}

/// A JSON array of values already encoded.
private struct JSONArrayBuilder {
    private(set) var bytes: [UInt8] = [UInt8(ascii: "[")]

    mutating func append(raw value: [UInt8]) {
        if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
        bytes += value
    }

    var closed: [UInt8] { bytes + [UInt8(ascii: "]")] }
}
