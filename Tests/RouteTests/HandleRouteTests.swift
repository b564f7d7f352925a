import HTTP1
import ProfileService
import ProfileServiceTesting
import Testing

/// Lookups by handle and renames through the routes (docs/design.md §12): `GET
/// /users/by-username/{username}`, `GET /users/profiles?usernames=…` and `PATCH {"username":…}`.
@Suite struct HandleRouteTests {
    let service: InProcessService

    init() throws { service = try InProcessService() }

    /// A profile created with `username`; its id.
    private func created(_ username: String) -> Int64 {
        let id = InProcessService.newID()
        let answer = service.put(
            id, #"{"username":"\#(username)","display_name":"First"}"#, token: service.token(for: id), headers: ["If-None-Match": "*"])
        #expect(answer.status == .created, "\(answer.bodyText)")
        return id
    }

    private func rename(_ id: Int64, to username: String, headers: HTTPHeaders = [:]) -> HTTPResponse {
        var headers = headers
        headers.add(name: "Content-Type", value: "application/merge-patch+json")
        headers.add(name: "Authorization", value: "Bearer \(service.token(for: id))")
        return service.request(.patch, "/users/profile/\(id)", headers: headers, body: #"{"username":"\#(username)"}"#)
    }

    private func lookUp(_ username: String, query: String = "", headers: HTTPHeaders = [:]) -> HTTPResponse {
        service.request(.get, "/users/by-username/\(username)\(query)", headers: headers)
    }

    private static func unique(_ prefix: String) -> String { prefix + String(UInt32.random(in: 0...UInt32.max)) }

    @Test func aLookupAnswersAsAReadByIDAndInAnySpelling() {
        let name = Self.unique("Ada_")
        let id = created(name)
        let byID = service.get(id)
        for spelling in [name, name.lowercased(), name.uppercased()] {
            let found = lookUp(spelling)
            #expect(found.status == .ok, "\(spelling): \(found.bodyText)")
            #expect(found.body == byID.body && found.headers["ETag"] == byID.headers["ETag"])
            #expect(found.headers["Content-Location"] == "/users/profile/\(id)")
            #expect(found.json?["username"] as? String == name, "the profile keeps its spelling")
        }
        #expect(lookUp(name, headers: ["If-None-Match": "\"1\""]).status == .notModified)
        #expect(lookUp(name, query: "?min_version=1").status == .ok)
        #expect(service.request(.head, "/users/by-username/\(name)").status == .ok)
    }

    @Test func namesNoOneHoldsAre404AndNamesNoOneCanHoldAre400() {
        let absent = lookUp(Self.unique("nobody_"))
        #expect(absent.status == .notFound && absent.problemKind == "profile-not-found")
        for invalid in ["ab", "ad%20a", "a-b-c", String(repeating: "a", count: 33)] {
            let refused = lookUp(invalid)
            #expect(refused.status == .badRequest && refused.problemKind == "invalid-username", "\(invalid)")
        }
        #expect(lookUp("ada/extra").status == .notFound)
        #expect(service.request(.put, "/users/by-username/ada").status == .methodNotAllowed)
    }

    @Test func aRenameRedirectsTheOldHandleKeepsItForItsOwnerAndCanBeUndone() {
        let old = Self.unique("old_")
        let new = Self.unique("new_")
        let id = created(old)
        let renamed = rename(id, to: new, headers: ["If-Match": "\"1\""])
        #expect(renamed.status == .ok && renamed.json?["username"] as? String == new && renamed.headers["ETag"] == "\"2\"")

        // The renamer reads its own rename at once, by the new handle and through the old one.
        #expect(lookUp(new, query: "?min_version=2").json?["version"] as? Int == 2)
        let redirect = lookUp(old, query: "?min_version=2")
        #expect(redirect.status == .permanentRedirect)
        #expect(redirect.headers["Location"] == "/users/by-username/\(new)?min_version=2")

        // No one else takes the old handle while it is kept, in any spelling.
        let other = created(Self.unique("other_"))
        let taken = rename(other, to: old.uppercased())
        #expect(taken.status == .conflict && taken.problemKind == "username-taken", "\(taken.bodyText)")
        let newcomer = InProcessService.newID()
        let creation = service.put(
            newcomer, #"{"username":"\#(old)","display_name":"X"}"#, token: service.token(for: newcomer), headers: ["If-None-Match": "*"])
        #expect(creation.status == .conflict && creation.problemKind == "username-taken", "\(creation.bodyText)")

        // Its owner takes it back; the handle it leaves redirects in turn.
        #expect(rename(id, to: old).status == .ok)
        #expect(lookUp(old).json?["id"] as? Int64 == id)
        let back = lookUp(new)
        #expect(back.headers["Location"] == "/users/by-username/\(old)", "\(back.status) \(back.bodyText)")
        // A new spelling of one's own handle keeps nothing in reserve.
        #expect(rename(id, to: old.uppercased()).status == .ok)
        #expect(lookUp(old).json?["username"] as? String == old.uppercased())
    }

    @Test func aRenameToAHandleSomeoneHoldsIsRefusedAndChangesNothing() {
        let first = created(Self.unique("holder_"))
        let held = service.get(first).json?["username"] as? String ?? ""
        let second = created(Self.unique("second_"))
        let refused = rename(second, to: held.uppercased())
        #expect(refused.status == .conflict && refused.problemKind == "username-taken")
        #expect(service.get(second).headers["ETag"] == "\"1\"", "nothing changed")
        let invalid = rename(second, to: "no spaces")
        #expect(invalid.status == .unprocessableContent && invalid.json?["field"] as? String == "username")
    }

    @Test func aListByHandleAnswersHoldersRenamesAndMissingNames() {
        let held = Self.unique("held_")
        let old = Self.unique("was_")
        let new = Self.unique("now_")
        let nobody = Self.unique("nobody_")
        let heldID = created(held)
        let movedID = created(old)
        #expect(rename(movedID, to: new).status == .ok)

        let list = service.request(.get, "/users/profiles?usernames=\(held.uppercased()),\(old),\(nobody),\(held)")
        #expect(list.status == .ok, "\(list.bodyText)")
        let profiles = list.json?["profiles"] as? [[String: Any]] ?? []
        #expect(profiles.map { $0["id"] as? Int64 } == [heldID, movedID], "in the order asked, each once")
        #expect(list.json?["missing"] as? [String] == [nobody])
        #expect(list.json?["renamed"] as? [String: String] == [old: new])
        let again = service.request(.get, "/users/profiles?usernames=\(held),\(old),\(nobody)", headers: ["If-None-Match": list.headers["ETag"] ?? ""])
        #expect(again.status == .notModified, "the same members at the same versions")

        #expect(service.request(.get, "/users/profiles?usernames=ab").problemKind == "invalid-username")
        #expect(service.request(.get, "/users/profiles?usernames=\(held)&ids=1").status == .badRequest)
        let tooMany = (0...100).map { "name\($0)" }.joined(separator: ",")
        #expect(service.request(.get, "/users/profiles?usernames=\(tooMany)").status == .badRequest)
    }
}
