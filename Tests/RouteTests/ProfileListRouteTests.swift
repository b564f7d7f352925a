import Foundation
import HTTP1
import ProfileService
import ProfileServiceTesting
import TestSupport
import Testing

/// `GET /users/profiles?ids=…`, answered in process: shape, order, `missing`, floors, the tag and
/// 304, HEAD, and the 400s that name the field.
@Suite struct ProfileListRouteTests {
    let service: InProcessService

    init() throws {
        service = try InProcessService()
    }

    private func list(_ ids: String, headers: HTTPHeaders = [:]) -> HTTPResponse {
        service.request(.get, "/users/profiles?ids=\(ids)", headers: headers)
    }

    private func members(_ response: HTTPResponse) -> [(id: Int64, version: Int)] {
        ((response.json?["profiles"] as? [[String: Any]]) ?? []).map {
            (Int64(($0["id"] as? Int) ?? 0), ($0["version"] as? Int) ?? 0)
        }
    }

    @Test func theProfilesInTheOrderAskedEachAsItsOwnGETAnswersIt() {
        let ids = (0..<3).map { _ in InProcessService.newID() }
        for id in ids { service.create(id, displayName: "Member \(id % 1000)") }
        let absent = InProcessService.newID()
        let response = list("\(ids[2]),\(absent),\(ids[0]),\(ids[1]),\(ids[2])")
        #expect(response.status == .ok)
        #expect(response.headers["Content-Type"] == "application/json")
        #expect(response.headers["Cache-Control"] == "no-cache")
        #expect(members(response).map(\.id) == [ids[2], ids[0], ids[1]], "in order, a repeated id once")
        #expect(response.json?["missing"] as? [Int] == [Int(absent)])
        // Each member is byte for byte what GET /users/profile/{id} answers.
        let single = service.get(ids[0]).bodyText
        #expect(response.bodyText.contains(single))
    }

    @Test func aFloorIsNeverAnsweredOlderAndTheTagFollowsTheVersions() {
        let id = InProcessService.newID()
        let other = InProcessService.newID()
        service.create(id)
        service.create(other)
        let first = list("\(id),\(other)")
        let tag = first.headers["ETag"]
        #expect(tag?.hasPrefix("\"L") == true)
        #expect(list("\(id),\(other)", headers: ["If-None-Match": tag ?? ""]).status == .notModified)
        #expect(list("\(other),\(id)").headers["ETag"] != tag, "another order, another answer")

        #expect(service.put(id, #"{"display_name":"Second","version":1}"#, token: service.token(for: id)).status == .ok)
        let floored = list("\(id)@2,\(other)")
        #expect(members(floored).map(\.version) == [2, 1])
        let changed = list("\(id),\(other)", headers: ["If-None-Match": tag ?? ""])
        #expect(changed.status == .ok, "a member's new version changes the tag")
        #expect(changed.headers["ETag"] != tag)
        // A floor no version meets: the current row, as for one profile.
        #expect(members(list("\(id)@2147483647")).map(\.version) == [2])
    }

    @Test func headAnswersTheHeadOfTheList() {
        let id = InProcessService.newID()
        service.create(id)
        let head = service.request(.head, "/users/profiles?ids=\(id)")
        #expect(head.status == .ok)
        #expect(head.headers["ETag"] == list("\(id)").headers["ETag"])
    }

    @Test(arguments: [
        "/users/profiles", "/users/profiles?ids=", "/users/profiles?ids=1,,2", "/users/profiles?ids=0",
        "/users/profiles?ids=1@0", "/users/profiles?ids=1@x", "/users/profiles?ids=%2D1",
        "/users/profiles?ids=" + (1...101).map(String.init).joined(separator: ","),
    ])
    func badListsAre400NamingTheField(target: String) {
        let response = service.request(.get, target)
        #expect(response.status == .badRequest)
        #expect(response.problemKind == "invalid-ids")
        #expect(response.json?["field"] as? String == "ids")
        #expect(response.headers["Content-Type"] == "application/problem+json")
    }

    @Test func percentEncodedSeparatorsAreTheSameList() {
        let id = InProcessService.newID()
        service.create(id)
        let encoded = service.request(.get, "/users/profiles?ids=\(id)%401%2C\(id)")
        #expect(encoded.status == .ok)
        #expect(members(encoded).map(\.id) == [id])
    }

    @Test func readsOfAListNeedATokenWhenConfigured() throws {
        let strict = try InProcessService(requireAuthForReads: true)
        let id = InProcessService.newID()
        strict.create(id)
        #expect(strict.request(.get, "/users/profiles?ids=\(id)").status == .unauthorized)
        let authorized = strict.request(
            .get, "/users/profiles?ids=\(id)", headers: ["Authorization": "Bearer \(strict.token(for: 99))"])
        #expect(authorized.status == .ok)
        #expect(strict.request(.put, "/users/profiles?ids=\(id)").status == .methodNotAllowed)
    }
}
