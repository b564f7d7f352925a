import HTTP1

extension ProfileResponder {
    /// `GET /users/profiles?ids=3@7,1,2` (and `HEAD`): the profiles in the order asked — each what
    /// `GET /users/profile/{id}` answers, never older than its floor — and the ids that do not
    /// exist in `missing`; `If-None-Match` with the list's tag is 304 (docs/design.md §2.7).
    /// `read` is what its head asked (authorized, its ids parsed).
    func getProfiles(_ read: ProfileListRead, _ request: HTTPRequest, worker: ProfileWorker) throws(Problem) -> HTTPResponse {
        let list = read.list
        let answers: [ProfileRepository.Representation?]
        do {
            answers = try worker.repository.read(list)
        } catch {
            throw Self.problem(for: error)
        }

        var body: [UInt8] = []
        body.reserveCapacity(answers.reduce(32) { $0 + ($1?.json.publicView.count ?? 0) + 1 })
        body.append(contentsOf: #"{"profiles":["#.utf8)
        var missing: [UInt8] = []
        var tag = ListEntityTag()
        var views = AnswerViews()
        for (member, answer) in zip(list.members, answers) {
            let view = read.reader.view(of: member.id)
            tag.add(id: member.id, version: answer?.version ?? 0, view: view)
            if let answer {
                views.add(answer.json, view)
                if body.last != UInt8(ascii: "[") { body.append(UInt8(ascii: ",")) }
                body.append(contentsOf: answer.json.view(view))
            } else {
                if !missing.isEmpty { missing.append(UInt8(ascii: ",")) }
                missing.append(contentsOf: String(member.id).utf8)
            }
        }
        body.append(contentsOf: #"],"missing":["#.utf8)
        body.append(contentsOf: missing)
        body.append(contentsOf: "]}".utf8)

        var headers: HTTPHeaders = ["ETag": tag.value, "Cache-Control": "no-cache"]
        views.addHeaders(to: &headers)
        if let condition = request.headers["If-None-Match"], Self.entityTags(condition, contain: tag.value) {
            return HTTPResponse(status: .notModified, headers: headers)
        }
        headers.add(name: "Content-Type", value: "application/json")
        return HTTPResponse(status: .ok, headers: headers, body: body)
    }
}

extension ProfileResponder {
    /// The list named by the request's `ids` (400 `invalid-ids` when absent or malformed).
    static func listRequest(_ request: HTTPRequest, maximumIDs: Int) throws(Problem) -> ProfileListRequest {
        guard let ids = request.queryValue(for: "ids") else {
            throw Problem(.invalidIDs, detail: "name the profiles: ids=3,1,2 (each may carry a floor: 3@7)", field: "ids")
        }
        do {
            return try ProfileListRequest(ids: ids, maximumIDs: maximumIDs)
        } catch {
            throw Problem(.invalidIDs, detail: error.description, field: "ids")
        }
    }
}

/// What the views of the profiles an answer carries (one, a list's, a stream's first events) ask of
/// its headers: while some field is owner-only the answer varies with `Authorization`, and one
/// with an owner's view is for that reader's cache alone.
struct AnswerViews {
    private var varies = false
    private var holdsOwnerView = false

    mutating func add(_ json: ProfileJSON, _ view: ProfileView) {
        guard json.hasOwnerView else { return }
        varies = true
        if view == .owner { holdsOwnerView = true }
    }

    func addHeaders(to headers: inout HTTPHeaders) {
        guard varies else { return }
        headers.add(name: "Vary", value: "Authorization")
        if holdsOwnerView { headers.replaceOrAdd(name: "Cache-Control", value: "private, no-cache") }
    }
}

/// The entity tag of a list answer: a 128-bit digest of each member's id and version (0 for a
/// missing one) in order, so it changes exactly when a member's version, a member's existence or
/// the order changes. Two FNV-1a 64 digests with different offsets: not a defence against an
/// adversary (the client already holds the versions), a name for one answer.
struct ListEntityTag {
    private var low: UInt64 = 0xcbf2_9ce4_8422_2325
    private var high: UInt64 = 0x6c62_272e_07bb_0142

    /// Adds a member; an owner's view counts apart from the public one (its version's high bit), so
    /// a list with the reader's own profile never shares a tag with the same list read by others.
    mutating func add(id: Int64, version: Int32, view: ProfileView = .anyone) {
        let viewBit: UInt64 = view == .owner ? 1 << 63 : 0
        for value in [UInt64(bitPattern: id), UInt64(UInt32(bitPattern: version)) | viewBit] {
            for shift in stride(from: 0, to: 64, by: 8) {
                let byte = (value >> UInt64(shift)) & 0xff
                low = (low ^ byte) &* 0x0000_0100_0000_01b3
                high = (high ^ byte) &* 0x0000_0100_0000_01b3
            }
        }
    }

    /// `"L` and 32 hex digits `"`: never a version's tag (`"7"`), so a list's tag can never be
    /// mistaken for a profile's.
    var value: String {
        "\"L" + Self.hex(high) + Self.hex(low) + "\""
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
