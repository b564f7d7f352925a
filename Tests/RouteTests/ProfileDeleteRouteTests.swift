import HTTP1
import ProfileService
import ProfileServiceTesting
import Testing

/// `DELETE /users/profile/{id}`: by the owner or an administrator, optimistic with `If-Match`,
/// and afterwards the profile is gone from PostgreSQL and from the cache; created again, it
/// continues its versions.
@Suite struct ProfileDeleteRouteTests {
    let service: InProcessService

    init() throws { service = try InProcessService() }

    private func delete(_ id: Int64, token: String?, headers: HTTPHeaders = [:]) -> HTTPResponse {
        var headers = headers
        if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
        return service.request(.delete, "/users/profile/\(id)", headers: headers)
    }

    @Test func theOwnerDeletesAndEveryReadAfterIs404() {
        let id = InProcessService.newID()
        #expect(service.create(id).status == .created)
        #expect(service.get(id).headers["X-Cache"] == "hit", "cached before the deletion")
        let deleted = delete(id, token: service.token(for: id))
        #expect(deleted.status == .noContent)
        #expect(deleted.body.isEmpty)
        let read = service.get(id)
        #expect(read.status == .notFound && read.problemKind == "profile-not-found")
        #expect(service.get(id).headers["X-Cache"] == nil || service.get(id).status == .notFound)
        let list = service.request(.get, "/users/profiles?ids=\(id)")
        #expect(list.status == .ok && list.json?["missing"] as? [Int64] == [id], "\(list.bodyText)")
        #expect(delete(id, token: service.token(for: id)).status == .notFound, "once")
    }

    @Test func onlyTheOwnerOrAnAdministratorMayDelete() {
        let id = InProcessService.newID()
        #expect(service.create(id).status == .created)
        #expect(delete(id, token: nil).status == .unauthorized)
        let stranger = delete(id, token: service.token(for: id + 1))
        #expect(stranger.status == .forbidden && stranger.problemKind == "forbidden")
        #expect(service.get(id).status == .ok, "a refused deletion changes nothing")
        #expect(delete(id, token: service.token(for: 1, scope: "profiles:admin")).status == .noContent)
        #expect(service.get(id).status == .notFound)
    }

    @Test func ifMatchDeletesOnlyThatVersion() {
        let id = InProcessService.newID()
        #expect(service.create(id).status == .created)
        let token = service.token(for: id)
        let stale = delete(id, token: token, headers: ["If-Match": "\"7\""])
        #expect(stale.status == .conflict && stale.problemKind == "version-conflict")
        #expect(stale.headers["ETag"] == "\"1\"")
        #expect(service.get(id).status == .ok)
        let malformed = delete(id, token: token, headers: ["If-Match": "7"])
        #expect(malformed.status == .badRequest && malformed.problemKind == "malformed-request")
        #expect(delete(id, token: token, headers: ["If-Match": "\"1\""]).status == .noContent)
    }

    @Test func aProfileCreatedAgainContinuesItsVersions() {
        let id = InProcessService.newID()
        #expect(service.create(id).status == .created)
        let renamed = service.put(id, #"{"display_name":"Two","version":1}"#, token: service.token(for: id))
        #expect(renamed.headers["ETag"] == "\"2\"")
        #expect(delete(id, token: service.token(for: id)).status == .noContent)
        let again = service.create(id)
        #expect(again.status == .created)
        #expect(again.headers["ETag"] == "\"3\"", "above the deleted version 2")
        #expect(service.get(id).headers["ETag"] == "\"3\"")
    }

    @Test func anInvalidIDIs400AndAnUnknownOne404() {
        #expect(delete(0, token: service.token(for: 1, scope: "profiles:admin")).status == .badRequest)
        let missing = InProcessService.newID()
        #expect(delete(missing, token: service.token(for: missing)).status == .notFound)
    }
}
