import HTTP1
import Logging

extension ProfileResponder {
    /// `GET /users/profile/{id}[?min_version=N]`, honouring `If-None-Match`: `read` is what its
    /// head asked (authorized), `batched` what its batch learned of the id for it.
    func getProfile(
        _ read: ProfileRead, _ request: HTTPRequest, worker: ProfileWorker, batched: ProfileRepository.BatchedRead?
    ) throws(Problem) -> HTTPResponse {
        let representation: ProfileRepository.Representation?
        do {
            representation = try worker.repository.read(id: read.id, minVersion: read.floor, batched: batched)
        } catch {
            throw Self.problem(for: error)
        }
        guard let representation else { throw .notFound(read.id) }
        return Self.readResponse(representation, request, view: read.reader.view(of: read.id))
    }

    /// A read's answer: the profile in `view` with that view's `ETag`, or 304 when `If-None-Match`
    /// names it (docs/design.md §13).
    static func readResponse(
        _ representation: ProfileRepository.Representation, _ request: HTTPRequest, view: ProfileView
    ) -> HTTPResponse {
        let entityTag = representation.entityTag(view)
        var headers: HTTPHeaders = [
            "ETag": entityTag,
            "Cache-Control": "no-cache",
            "X-Cache": representation.cacheOutcome.rawValue,
        ]
        viewHeaders(representation.json, view, into: &headers)
        if let condition = request.headers["If-None-Match"], Self.entityTags(condition, contain: entityTag) {
            return HTTPResponse(status: .notModified, headers: headers)
        }
        headers.add(name: "Content-Type", value: "application/json")
        return HTTPResponse(status: .ok, headers: headers, body: representation.json.view(view))
    }

    /// Answers a `PUT` or `PATCH` whose body is parsed; `madeTogether` is what its group made of
    /// it with the group's other writes (docs/design.md §11.2).
    func answerWrite(
        _ parsed: ParsedWrite, worker: ProfileWorker, madeTogether: ProfileRepository.WrittenTogether?
    ) throws(Problem) -> HTTPResponse {
        switch parsed {
        case .put(let write, let body):
            return try putProfile(write, try body.get(), worker: worker, madeTogether: madeTogether)
        case .patch(let patch, let changes):
            return try patchProfile(patch, try changes.get(), worker: worker, madeTogether: madeTogether)
        }
    }

    /// `PUT /users/profile/{id}`: an optimistic update, or a creation with `If-None-Match: *`
    /// or `"version": 0`. `write` is what its head asked (authorized), `parsed` what its body
    /// asks, `madeTogether` what its group made of it with others' writes.
    private func putProfile(
        _ write: ProfileWrite, _ parsed: ProfileWriteRequest, worker: ProfileWorker,
        madeTogether: ProfileRepository.WrittenTogether?
    ) throws(Problem) -> HTTPResponse {
        let id = write.id
        do {
            switch parsed {
            case .update(let changes, let expectedVersion):
                let update = ProfileUpdate(id: id, changes: changes, expectedVersion: expectedVersion)
                return try answer(try worker.repository.update(update, madeTogether: madeTogether), of: update)
            case .create(let username, let displayName, let fields):
                let profile = try worker.repository.create(id: id, username: username, displayName: displayName, fields: fields)
                liveUpdates?.publish(profile)
                var response = Self.profileResponse(.created, profile)
                response.headers.add(name: "Location", value: Self.profilePathPrefix + String(id))
                return response
            }
        } catch let error as Problem {
            throw error
        } catch let error as ProfileStoreError {
            throw Self.problem(for: error)
        } catch {
            throw .internalError()
        }
    }

    /// `PATCH /users/profile/{id}` with a JSON Merge Patch: the fields it names set, the others
    /// left. With `If-Match: "N"` only at version N (409 otherwise, as `PUT`); without, whatever
    /// the version — two patches never conflict, the later one's fields win — and the answer is
    /// the whole new profile, so the writer reads its own write from its version as after `PUT`.
    /// `changes` is what its body asks, `madeTogether` what its group made of it with other writes.
    private func patchProfile(
        _ patch: ProfilePatchHead, _ changes: ProfileChanges, worker: ProfileWorker,
        madeTogether: ProfileRepository.WrittenTogether?
    ) throws(Problem) -> HTTPResponse {
        if changes.isEmpty { return try unchanged(patch, worker: worker) }
        let update = ProfileUpdate(id: patch.id, changes: changes, expectedVersion: patch.expectedVersion)
        let outcome: ProfileUpdateOutcome
        do {
            outcome = try worker.repository.update(update, madeTogether: madeTogether)
        } catch {
            throw Self.problem(for: error)
        }
        return try answer(outcome, of: update)
    }

    /// A patch that changes nothing (`{}`, RFC 7396): the profile as PostgreSQL has it, no new
    /// version — or the 409 of its `If-Match`, or 404. Read from the row, not the cache, as the
    /// answer to a write is: the patcher reads its own writes from it.
    private func unchanged(_ patch: ProfilePatchHead, worker: ProfileWorker) throws(Problem) -> HTTPResponse {
        let row: Profile?
        do {
            row = try worker.repository.settledRow(id: patch.id)
        } catch {
            throw Self.problem(for: error)
        }
        guard let row else { throw Problem.notFound(patch.id) }
        if let expected = patch.expectedVersion, expected != row.version {
            throw Self.versionConflict(current: row, expected: expected)
        }
        return Self.profileResponse(.ok, row)
    }

    /// The answer to an update (`PUT` or `PATCH`): the new profile, published to its streams, or
    /// the 409 or 404 it came to.
    private func answer(_ outcome: ProfileUpdateOutcome, of update: ProfileUpdate) throws(Problem) -> HTTPResponse {
        switch outcome {
        case .updated(let profile):
            liveUpdates?.publish(profile)
            return Self.profileResponse(.ok, profile)
        case .versionMismatch(let current):
            throw Self.versionConflict(current: current, expected: update.expectedVersion)
        case .notFound:
            throw Problem.notFound(update.id)
        }
    }

    /// 409 with the current profile: the change expected another version.
    static func versionConflict(current: Profile, expected: Int32?) -> Problem {
        Problem(
            .versionConflict, detail: "the profile is at version \(current.version), not \(expected ?? 0)", field: "version",
            current: current)
    }

    /// `DELETE /users/profile/{id}` by its owner or an administrator (`If-Match`: only at that
    /// version): 204, and every open stream of it hears `deleted`.
    func deleteProfile(_ deletion: ProfileDeletion, worker: ProfileWorker) throws(Problem) -> HTTPResponse {
        let outcome: ProfileDeleteOutcome
        do {
            outcome = try worker.repository.delete(id: deletion.id, expectedVersion: deletion.expectedVersion)
        } catch {
            throw Self.problem(for: error)
        }
        switch outcome {
        case .deleted(let version):
            liveUpdates?.publish(id: deletion.id, version: 0)
            logger.info("profile deleted", metadata: ["id": "\(deletion.id)", "version": "\(version)"])
            return HTTPResponse(status: .noContent, headers: ["Cache-Control": "no-cache"])
        case .versionMismatch(let current):
            throw Self.versionConflict(current: current, expected: deletion.expectedVersion)
        case .notFound:
            throw Problem.notFound(deletion.id)
        }
    }

    // MARK: Input

    /// A positive 64-bit id in canonical decimal form (no sign, no leading zeros).
    static func profileID(from path: String) throws(Problem) -> Int64 {
        let text = path.dropFirst(profilePathPrefix.count)
        guard let id = canonicalPositive(text, as: Int64.self) else {
            if text.contains("/") || text.isEmpty {
                throw Problem(.noSuchRoute, detail: "no route for \(path.prefix(200))")
            }
            throw Problem(.invalidID, detail: "the profile id must be a positive 64-bit integer", field: "id")
        }
        return id
    }

    static func minVersion(from request: HTTPRequest) throws(Problem) -> Int32? {
        guard let text = request.queryValue(for: "min_version") else { return nil }
        guard let value = canonicalPositive(Substring(text), as: Int32.self) else {
            throw Problem(.invalidMinVersion, detail: "min_version must be an integer from 1 to 2147483647", field: "min_version")
        }
        return value
    }

    /// The version a read must not go below: `min_version`, or the highest version the client
    /// names in `If-None-Match` — a client revalidating `"7"` holds version 7, and answering it
    /// 200 with 6 from an entry not yet repaired would make an HTTP cache replace 7 with 6
    /// (docs/design.md §2.1). The higher of the two when both are given.
    static func readFloor(of request: HTTPRequest) throws(Problem) -> Int32? {
        let minVersion = try minVersion(from: request)
        guard let condition = request.headers["If-None-Match"], let held = highestVersion(named: condition) else {
            return minVersion
        }
        return max(minVersion ?? 0, held)
    }

    /// The highest version among the entity tags of an `If-None-Match` list (`"7"`, `W/"7"`, a
    /// public view's `"7-public"`); nil when it names none (`*`, tags this service never sends).
    static func highestVersion(named list: String) -> Int32? {
        var highest: Int32?
        for candidate in list.split(separator: ",") {
            var tag = Substring(candidate.trimmed)
            if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
            guard tag.count >= 3, tag.first == "\"", tag.last == "\"" else { continue }
            var digits = tag.dropFirst().dropLast()
            if digits.hasSuffix(Self.publicTagSuffix) { digits = digits.dropLast(Self.publicTagSuffix.count) }
            guard let version = canonicalPositive(digits, as: Int32.self) else { continue }
            highest = max(highest ?? version, version)
        }
        return highest
    }

    /// What a public view's entity tag adds to the version (``ProfileJSON/entityTag(version:view:)``).
    private static let publicTagSuffix = "-public"

    /// `If-Match: "N"` (strong tag of one version) → N.
    static func ifMatchVersion(_ header: String?) throws(ProfileRequestError) -> Int32? {
        guard let header else { return nil }
        let tag = header.trimmed
        guard tag.count >= 3, tag.first == "\"", tag.last == "\"",
            let version = canonicalPositive(Substring(tag.dropFirst().dropLast()), as: Int32.self)
        else {
            throw .malformed(field: "If-Match", "If-Match must be one entity tag such as \"3\"")
        }
        return version
    }

    /// `If-None-Match: *` on a write: the profile must not exist yet. A write has no use for
    /// entity tags there, so anything else is refused rather than ignored.
    static func ifNoneMatchAny(_ header: String?) throws(ProfileRequestError) -> Bool {
        guard let header else { return false }
        guard header.trimmed == "*" else {
            throw .malformed(field: "If-None-Match", "a write accepts only If-None-Match: * (create)")
        }
        return true
    }

    /// Weak comparison of an `If-None-Match` list with a tag (RFC 9110 §13.1.2).
    static func entityTags(_ list: String, contain tag: String) -> Bool {
        list.split(separator: ",").contains { candidate in
            var candidate = Substring(candidate.trimmed)
            if candidate == "*" { return true }
            if candidate.hasPrefix("W/") { candidate = candidate.dropFirst(2) }
            return candidate == tag
        }
    }

    // MARK: Output

    /// The answer to a write: the profile as its writer — the owner or an administrator — reads it.
    static func profileResponse(_ status: HTTPStatus, _ profile: Profile) -> HTTPResponse {
        var headers: HTTPHeaders = ["Content-Type": "application/json", "ETag": profile.entityTag(.owner), "Cache-Control": "no-cache"]
        viewHeaders(profile.json, .owner, into: &headers)
        return HTTPResponse(status: status, headers: headers, body: profile.ownerJSON)
    }

    static func problem(for error: ProfileStoreError) -> Problem {
        switch error {
        case .unavailable:
            return .databaseUnavailable()
        case .idTaken(let current):
            return Problem(.profileExists, detail: "a profile with this id exists already", current: current)
        case .usernameTaken:
            return Problem(.usernameTaken, detail: "this username is taken", field: "username")
        case .unexpected:
            return .internalError()
        }
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace).
    var trimmed: String {
        guard let start = firstIndex(where: { $0 != " " && $0 != "\t" }) else { return "" }
        let end = lastIndex(where: { $0 != " " && $0 != "\t" })!  // exists: start does
        return String(self[start...end])
    }
}
