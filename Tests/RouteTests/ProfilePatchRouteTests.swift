import HTTP1
import ProfileService
import ProfileServiceTesting
import Testing

/// `PATCH /users/profile/{id}` with a JSON Merge Patch: the fields it names set, optimistic with
/// `If-Match`, and without it two patches never conflict.
@Suite struct ProfilePatchRouteTests {
    let service: InProcessService

    init() throws { service = try InProcessService() }

    private func patch(
        _ id: Int64, _ body: String, token: String?, contentType: String = "application/merge-patch+json",
        headers: HTTPHeaders = [:]
    ) -> HTTPResponse {
        var headers = headers
        headers.add(name: "Content-Type", value: contentType)
        if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
        return service.request(.patch, "/users/profile/\(id)", headers: headers, body: body)
    }

    @Test func aPatchWithoutIfMatchAppliesToWhateverVersionIsStored() {
        let id = InProcessService.newID()
        #expect(service.create(id).status == .created)
        let token = service.token(for: id)
        // Two devices patch without knowing of each other: neither conflicts, the later one wins.
        let first = patch(id, #"{"display_name":"From the phone"}"#, token: token)
        let second = patch(id, #"{"display_name":"From the laptop"}"#, token: token)
        #expect(first.status == .ok && first.headers["ETag"] == "\"2\"")
        #expect(second.status == .ok && second.headers["ETag"] == "\"3\"")
        #expect(second.json?["display_name"] as? String == "From the laptop")
        #expect(second.json?["username"] as? String != nil, "the whole profile")
        // Each reads its own write from its version.
        #expect(service.get(id, query: "?min_version=2").json?["version"] as? Int == 3)
        #expect(service.get(id, query: "?min_version=3").json?["display_name"] as? String == "From the laptop")
    }

    /// RFC 7396: `{}` applied to a profile is the profile. The answer is the profile as stored, at
    /// its version; `If-Match` still holds it to that version.
    @Test func anEmptyPatchChangesNothingAndAnswersTheProfile() {
        let id = InProcessService.newID()
        #expect(service.create(id).status == .created)
        let token = service.token(for: id)
        let empty = patch(id, "{}", token: token)
        #expect(empty.status == .ok, "\(empty.bodyText)")
        #expect(empty.headers["ETag"] == "\"1\"" && empty.json?["version"] as? Int == 1)
        #expect(empty.json?["display_name"] as? String == "First")
        #expect(patch(id, "{}", token: token, headers: ["If-Match": "\"1\""]).status == .ok)
        let stale = patch(id, "{}", token: token, headers: ["If-Match": "\"4\""])
        #expect(stale.status == .conflict && stale.problemKind == "version-conflict")
        #expect(service.get(id).json?["version"] as? Int == 1, "no new version")
        let absent = InProcessService.newID()
        #expect(patch(absent, "{}", token: service.token(for: absent)).status == .notFound)
    }

    /// A JSON Patch (RFC 6902) is a list of operations: read as a merge patch it would be refused
    /// for the wrong reason, or worse. It is 415, naming the media type a patch takes.
    @Test func aJSONPatchDocumentIs415() {
        let id = InProcessService.newID()
        #expect(service.create(id).status == .created)
        let response = patch(
            id, #"[{"op":"replace","path":"/display_name","value":"Ops"}]"#, token: service.token(for: id),
            contentType: "application/json-patch+json")
        #expect(response.status == .unsupportedMediaType && response.problemKind == "unsupported-media-type")
        #expect(response.bodyText.contains("application/merge-patch+json"))
        #expect(service.get(id).json?["display_name"] as? String == "First")
    }

    @Test func ifMatchMakesAPatchOptimisticAsPut() {
        let id = InProcessService.newID()
        #expect(service.create(id).status == .created)
        let token = service.token(for: id)
        let stale = patch(id, #"{"display_name":"Stale"}"#, token: token, headers: ["If-Match": "\"5\""])
        #expect(stale.status == .conflict && stale.problemKind == "version-conflict")
        #expect(stale.headers["ETag"] == "\"1\"")
        let current = patch(id, #"{"display_name":"Current"}"#, token: token, headers: ["If-Match": "\"1\""])
        #expect(current.status == .ok && current.headers["ETag"] == "\"2\"")
        #expect(patch(id, #"{"display_name":"x"}"#, token: token, headers: ["If-Match": "1"]).status == .badRequest)
    }

    @Test(arguments: [
        (#"{"pronouns":"she/her"}"#, 422, "pronouns"), (#"{"display_name":null}"#, 422, "display_name"),
        (#"{"bio":7}"#, 400, "bio"), (#"{"website":"http://example.com"}"#, 422, "website"),
        (#"{"username":"ot her"}"#, 422, "username"), (#"{"version":3}"#, 422, "version"),
        (#"{"display_name":""}"#, 422, "display_name"),
        (#"{"display_name":7}"#, 400, "display_name"), (#"["display_name"]"#, 400, nil),
        (#"{"display_name":"a",}"#, 400, nil),
    ] as [(String, Int, String?)])
    func aPatchTheProfileCannotTakeIsRefusedAndChangesNothing(body: String, status: Int, field: String?) {
        let id = InProcessService.newID()
        #expect(service.create(id).status == .created)
        let refused = patch(id, body, token: service.token(for: id))
        #expect(refused.status.code == status, "\(body) → \(refused.status.code) \(refused.bodyText)")
        #expect(refused.json?["field"] as? String == field, "\(body): \(refused.bodyText)")
        #expect(service.get(id).headers["ETag"] == "\"1\"", "nothing changed")
    }

    @Test func whoMayPatchWhatAndHow() {
        let id = InProcessService.newID()
        #expect(service.create(id).status == .created)
        let body = #"{"display_name":"Other"}"#
        #expect(patch(id, body, token: nil).status == .unauthorized)
        #expect(patch(id, body, token: service.token(for: id + 1)).status == .forbidden)
        #expect(patch(id, body, token: service.token(for: id), contentType: "text/plain").status == .unsupportedMediaType)
        #expect(patch(id, body, token: service.token(for: 1, scope: "profiles:admin")).status == .ok)
        let missing = InProcessService.newID()
        #expect(patch(missing, body, token: service.token(for: missing)).status == .notFound)
    }
}
