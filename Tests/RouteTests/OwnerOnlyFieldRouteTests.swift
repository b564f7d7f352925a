import Foundation
import HTTP1
import ProfileService
import ProfileServiceTesting
import Testing

/// Fields only their owner reads, and fields only administrators write, through the routes
/// (docs/design.md §13): every answer to anyone else leaves them out, whatever the cache holds.
@Suite struct OwnerOnlyFieldRouteTests {
    /// The standard fields, an owner-only `email` and `birthday`, and a public `verified` only
    /// administrators write.
    static let catalog = try! ProfileFieldCatalog(  // valid by construction
        ProfileFieldCatalog.standard.declarations + [
            ProfileFieldDeclaration(name: "email", kind: .email, maximumLength: 254, readBy: .owner),
            ProfileFieldDeclaration(name: "birthday", kind: .date, maximumLength: 10, readBy: .owner),
            ProfileFieldDeclaration(name: "verified", kind: .text, maximumLength: 20, writtenBy: .admin),
        ])
    /// Its own database: these declarations are not the other suites'.
    static let database = InMemoryDatabase(profileFields: catalog)

    let service: InProcessService

    init() throws { service = try InProcessService(database: Self.database) }

    private func bearer(_ id: Int64, scope: String? = nil) -> HTTPHeaders {
        ["Authorization": "Bearer \(service.token(for: id, scope: scope))"]
    }

    private func patch(_ id: Int64, _ body: String, as writer: HTTPHeaders? = nil, headers: HTTPHeaders = [:]) -> HTTPResponse {
        var headers = headers
        headers.add(name: "Content-Type", value: "application/merge-patch+json")
        for (name, value) in writer ?? bearer(id) { headers.add(name: name, value: value) }
        return service.request(.patch, "/users/profile/\(id)", headers: headers, body: body)
    }

    /// A profile whose owner set an email and a birthday; its id.
    private func profileWithEmail() -> Int64 {
        let id = InProcessService.newID()
        #expect(service.create(id).status == .created)
        let patched = patch(id, #"{"email":"ada@example.com","birthday":"1990-04-21"}"#)
        #expect(patched.status == .ok, "\(patched.bodyText)")
        return id
    }

    private static func carriesOwnerFields(_ response: HTTPResponse) -> Bool {
        response.bodyText.contains("ada@example.com") || response.bodyText.contains("1990-04-21")
    }

    @Test func theOwnerAndAdministratorsReadOwnerOnlyFieldsAndNoOneElseDoes() {
        let id = profileWithEmail()
        let stranger = InProcessService.newID()
        for _ in 0..<2 {  // the second time from the cache entry the first read filled
            let owner = service.get(id, headers: bearer(id))
            #expect(owner.json?["email"] as? String == "ada@example.com" && owner.json?["birthday"] as? String == "1990-04-21")
            #expect(owner.headers["ETag"] == "\"2\"" && owner.headers["Cache-Control"] == "private, no-cache")
            #expect(owner.headers["Vary"] == "Authorization")
            let admin = service.get(id, headers: bearer(stranger, scope: "profiles:admin"))
            #expect(admin.json?["email"] as? String == "ada@example.com")
            for headers in [[:], bearer(stranger)] as [HTTPHeaders] {
                let other = service.get(id, headers: headers)
                #expect(other.status == .ok && !Self.carriesOwnerFields(other), "\(other.bodyText)")
                #expect(other.json?.keys.contains("email") == false, "absent, not null: the reader cannot know")
                #expect(other.headers["ETag"] == "\"2-public\"" && other.headers["Cache-Control"] == "no-cache")
                #expect(other.headers["Vary"] == "Authorization")
            }
        }
        // Each view revalidates against its own tag only.
        #expect(service.get(id, headers: ["If-None-Match": "\"2-public\""]).status == .notModified)
        let ownersTag = service.get(id, headers: ["If-None-Match": "\"2\""])
        #expect(ownersTag.status == .ok && !Self.carriesOwnerFields(ownersTag))
        #expect(service.get(id, headers: bearer(id).merging(["If-None-Match": "\"2\""])).status == .notModified)
        #expect(service.get(id, headers: bearer(id).merging(["If-None-Match": "\"2-public\""])).status == .ok)
        // A public tag is a floor as the owner's is: never answered older than it.
        #expect(service.get(id, headers: ["If-None-Match": "\"3-public\""]).json?["version"] as? Int == 2)
    }

    @Test func listsAndLookupsByHandleGiveEachProfileInTheReadersView() throws {
        let mine = profileWithEmail()
        let theirs = profileWithEmail()
        let ids = "/users/profiles?ids=\(mine),\(theirs)"
        let asOwner = service.request(.get, ids, headers: bearer(mine))
        let profiles = try #require(asOwner.json?["profiles"] as? [[String: Any]])
        #expect(profiles.map { $0["email"] as? String } == ["ada@example.com", nil], "only the reader's own profile")
        #expect(asOwner.headers["Cache-Control"] == "private, no-cache" && asOwner.headers["Vary"] == "Authorization")
        let anonymous = service.request(.get, ids)
        #expect(!Self.carriesOwnerFields(anonymous) && anonymous.headers["Cache-Control"] == "no-cache")
        #expect(anonymous.headers["ETag"] != asOwner.headers["ETag"], "two views, two tags")
        let anonymousTag = try #require(anonymous.headers["ETag"])
        #expect(service.request(.get, ids, headers: ["If-None-Match": anonymousTag]).status == .notModified)
        #expect(service.request(.get, ids, headers: bearer(mine).merging(["If-None-Match": anonymousTag])).status == .ok)

        let username = try #require(service.get(mine).json?["username"] as? String)
        #expect(!Self.carriesOwnerFields(service.request(.get, "/users/by-username/\(username)")))
        #expect(service.request(.get, "/users/by-username/\(username)", headers: bearer(mine)).json?["email"] as? String == "ada@example.com")
        let byName = service.request(.get, "/users/profiles?usernames=\(username)", headers: bearer(theirs))
        #expect(byName.status == .ok && !Self.carriesOwnerFields(byName))
    }

    @Test func anEventStreamsFirstEventIsInTheReadersView() {
        let id = profileWithEmail()
        let stranger = service.request(.get, "/users/profile/\(id)/events", headers: bearer(InProcessService.newID()))
        #expect(stranger.status == .ok && stranger.bodyText.contains("event: profile") && !Self.carriesOwnerFields(stranger))
        let owner = service.request(.get, "/users/profile/\(id)/events", headers: bearer(id))
        #expect(owner.bodyText.contains("ada@example.com") && owner.headers["Cache-Control"] == "private, no-cache")
        #expect(owner.eventStream?.subscriptions.first?.receivesRestricted == true)
        #expect(stranger.eventStream?.subscriptions.first?.receivesRestricted == false)
        let list = service.request(.get, "/users/profiles/events?ids=\(id)", headers: bearer(InProcessService.newID()))
        #expect(list.status == .ok && !Self.carriesOwnerFields(list))
    }

    @Test func aWritersAnswersCarryEveryFieldAndAConflictTheOwnersView() {
        let id = profileWithEmail()
        let stale = patch(id, #"{"bio":"late"}"#, headers: ["If-Match": "\"1\""])
        #expect(stale.status == .conflict && stale.bodyText.contains("ada@example.com"), "the writer is the owner")
        #expect(stale.headers["Cache-Control"]?.hasPrefix("private") == true)
        let unset = patch(id, #"{"email":null}"#)
        #expect(unset.status == .ok && (unset.json?["email"].map { $0 is NSNull } ?? false), "the owner's view says null when unset")
    }

    @Test func kindsCheckTheirValuesAndAFieldOnlyAdministratorsWriteRefusesTheOwner() {
        let id = profileWithEmail()
        for (body, field) in [
            (#"{"email":"not an address"}"#, "email"), (#"{"email":"ada@localhost"}"#, "email"),
            (#"{"birthday":"2023-02-29"}"#, "birthday"), (#"{"birthday":"1990-4-21"}"#, "birthday"),
        ] {
            let refused = patch(id, body)
            #expect(refused.status == .unprocessableContent && refused.json?["field"] as? String == field, "\(body)")
        }
        #expect(patch(id, #"{"birthday":"2024-02-29"}"#).status == .ok)

        let byOwner = patch(id, #"{"verified":"yes","bio":"x"}"#)
        #expect(byOwner.status == .forbidden && byOwner.json?["field"] as? String == "verified")
        #expect(service.get(id).json?["bio"] is NSNull, "a refused write changes nothing")
        let byAdmin = patch(id, #"{"verified":"yes"}"#, as: bearer(InProcessService.newID(), scope: "profiles:admin"))
        #expect(byAdmin.status == .ok && service.get(id).json?["verified"] as? String == "yes", "public once set")
    }

    @Test func anExportHoldsEverythingForTheOwnerAndAdministratorsOnly() throws {
        let id = profileWithEmail()
        let export = service.request(.get, "/users/profile/\(id)/export", headers: bearer(id))
        #expect(export.status == .ok && export.headers["Cache-Control"] == "private, no-store")
        #expect(export.headers["Content-Disposition"] == #"attachment; filename="profile-\#(id).json""#)
        let document = try #require(export.json)
        let profile = try #require(document["profile"] as? [String: Any])
        #expect(profile["email"] as? String == "ada@example.com" && profile["version"] as? Int == 2)
        #expect(document["created_at"] is String && document["exported_at"] is String)
        let fields = try #require(document["fields"] as? [[String: Any]])
        #expect(fields.first { $0["name"] as? String == "email" }?["read_by"] as? String == "owner")
        #expect(document["username_reservations"] as? [Any] != nil)

        #expect(service.request(.get, "/users/profile/\(id)/export").status == .unauthorized)
        #expect(service.request(.get, "/users/profile/\(id)/export", headers: bearer(InProcessService.newID())).status == .forbidden)
        let admin = bearer(InProcessService.newID(), scope: "profiles:admin")
        #expect(service.request(.get, "/users/profile/\(id)/export", headers: admin).status == .ok)
        #expect(service.request(.delete, "/users/profile/\(id)", headers: bearer(id)).status == .noContent)
        let gone = service.request(.get, "/users/profile/\(id)/export", headers: bearer(id))
        #expect(gone.status == .notFound && gone.problemKind == "profile-not-found")
    }

    @Test func aTokenThatFailsIs401RatherThanAQuietPublicView() {
        let id = profileWithEmail()
        let expired = service.get(id, headers: ["Authorization": "Bearer not.a.token"])
        #expect(expired.status == .unauthorized && expired.problemKind == "invalid-token")
    }

    @Test func withAuthenticationOffEveryReaderIsEveryOwner() throws {
        let open = try InProcessService(database: Self.database, authorization: .disabled)
        let id = profileWithEmail()
        #expect(open.get(id).json?["email"] as? String == "ada@example.com", "--auth none: anyone may also change it")
    }
}

extension HTTPHeaders {
    fileprivate func merging(_ other: HTTPHeaders) -> HTTPHeaders {
        var merged = self
        for (name, value) in other { merged.add(name: name, value: value) }
        return merged
    }
}
