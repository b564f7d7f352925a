import Foundation
import HTTP1
import ProfileService
import ProfileServiceTesting
import TestSupport
import Testing

/// The conditions of a write, answered in process: what each precondition, media type and
/// creation conflict answers, and that a refused write changes nothing.
@Suite struct ProfileWriteRouteTests {
    let service: InProcessService

    init() throws {
        service = try InProcessService()
    }

    @Test func aCreationTakesOnlyANewIDAndAFreeUsername() {
        let id = InProcessService.newID()
        #expect(service.create(id, displayName: "First").status == .created)
        let again = service.create(id, displayName: "Second")
        #expect(again.status == .conflict)
        #expect(again.problemKind == "profile-exists")
        #expect((again.json?["current"] as? [String: Any])?["display_name"] as? String == "First")
        #expect(service.get(id).json?["display_name"] as? String == "First")

        // Another id asking for the same username.
        let other = id + 1
        let taken = service.put(
            other, #"{"username":"u\#(id % 1_000_000_000)","display_name":"Copy"}"#, token: service.token(for: other),
            headers: ["If-None-Match": "*"])
        #expect(taken.status == .conflict)
        #expect(taken.problemKind == "username-taken", "\(taken.bodyText)")
        #expect(service.get(other).status == .notFound)
    }

    /// Preconditions that cannot all hold are 412 before anything is read or written; a stale
    /// `If-Match` is a conflict (409) with the current profile, like a stale `version`.
    @Test func preconditionsThatCannotAllHoldAre412AndAStaleIfMatchIs409() {
        let id = InProcessService.newID()
        service.create(id)
        let owner = service.token(for: id)
        let disagreeing = service.put(id, #"{"display_name":"X","version":1}"#, token: owner, headers: ["If-Match": #""2""#])
        #expect(disagreeing.status == .preconditionFailed)
        #expect(disagreeing.problemKind == "precondition-failed")
        let createOnUpdate = service.put(id, #"{"display_name":"X","version":1}"#, token: owner, headers: ["If-None-Match": "*"])
        #expect(createOnUpdate.status == .preconditionFailed)
        #expect(createOnUpdate.problemKind == "precondition-failed")
        let stale = service.put(id, #"{"display_name":"Late"}"#, token: owner, headers: ["If-Match": #""7""#])
        #expect(stale.status == .conflict)
        #expect(stale.problemKind == "version-conflict")
        #expect((stale.json?["current"] as? [String: Any])?["version"] as? Int == 1)
        let read = service.get(id)
        #expect(read.json?["version"] as? Int == 1)
        #expect(read.json?["display_name"] as? String == "First")
    }

    @Test func aWriteThatIsNotJSONIs415() {
        let id = InProcessService.newID()
        service.create(id)
        let response = service.request(
            .put, "/users/profile/\(id)",
            headers: ["Content-Type": "text/plain", "Authorization": "Bearer \(service.token(for: id))"],
            body: #"{"display_name":"Plain","version":1}"#)
        #expect(response.status == .unsupportedMediaType)
        #expect(response.problemKind == "unsupported-media-type")
        #expect(service.get(id).json?["version"] as? Int == 1)
    }

    /// A body larger than a write under the declared fields may be (within the server's limit,
    /// which is the largest any declarations allow) is 413, `PUT` and `PATCH` alike, and changes
    /// nothing.
    @Test func aBodyLargerThanTheDeclaredFieldsAllowIs413() {
        let id = InProcessService.newID()
        service.create(id)
        let limit = ProfileFieldCatalog.standard.maximumWriteBodyBytes
        let bio = String(repeating: "a", count: limit)
        #expect(limit < ProfileResponder.maximumRequestBodyBytes, "the server reads such a body")
        let token = "Bearer \(service.token(for: id))"
        for (method, contentType, what) in [
            (HTTPMethod.put, "application/json", "a profile write"), (.patch, "application/merge-patch+json", "a profile patch"),
        ] {
            let response = service.request(
                method, "/users/profile/\(id)", headers: ["Content-Type": contentType, "Authorization": token],
                body: #"{"display_name":"Big","bio":"\#(bio)","version":1}"#)
            #expect(response.status == .contentTooLarge, "\(method)")
            #expect(response.problemKind == "body-too-large")
            #expect(response.bodyText.contains("\(what) is at most \(limit) bytes"), "\(response.bodyText)")
        }
        #expect(service.get(id).json?["version"] as? Int == 1)
    }

    /// A body's `id` (sent back as a GET gave it) must be the path's: a client that PUTs one
    /// profile to another's path has a bug, and nothing is written.
    @Test func aPutWhoseIDIsNotThePathsIs422() {
        let id = InProcessService.newID()
        service.create(id)
        let owner = service.token(for: id)
        for other in ["\(id + 1)", "\"\(id)\"", "null", "\(id).5"] {
            let response = service.put(id, #"{"id":\#(other),"display_name":"Other","version":1}"#, token: owner)
            #expect(response.status == .unprocessableContent, "\(other): \(response.bodyText)")
            #expect(response.json?["field"] as? String == "id", "\(other)")
        }
        #expect(service.get(id).json?["version"] as? Int == 1)
        let same = service.put(id, #"{"id":\#(id),"display_name":"Same","version":1}"#, token: owner)
        #expect(same.status == .ok, "\(same.bodyText)")
        // Ids past 15 digits are read exactly, whichever parser reads the body.
        let large: Int64 = 9_223_372_036_854_775_807
        service.create(large)
        let exact = service.put(large, #"{"id":9223372036854775807,"display_name":"Large","version":1}"#, token: service.token(for: large))
        #expect(exact.status == .ok, "\(exact.bodyText)")
        let offByOne = service.put(large, #"{"id":9223372036854775806,"display_name":"Large","version":2}"#, token: service.token(for: large))
        #expect(offByOne.status == .unprocessableContent)
        // 2^53 + 0.5 is 2^53 as a Double: the id is read exactly, so it is not the path's.
        let even: Int64 = 9_007_199_254_740_992
        service.create(even)
        let half = service.put(even, #"{"id":9007199254740992.5,"display_name":"Half","version":1}"#, token: service.token(for: even))
        #expect(half.status == .unprocessableContent, "\(half.bodyText)")
    }

    @Test func aReadWithAFloorIsNeverOlderThanTheFloor() {
        let id = InProcessService.newID()
        service.create(id)
        _ = service.get(id)  // version 1 cached
        let updated = service.put(id, #"{"display_name":"Second","version":1}"#, token: service.token(for: id))
        #expect(updated.status == .ok)
        let floored = service.get(id, query: "?min_version=2")
        #expect(floored.status == .ok)
        #expect(floored.json?["version"] as? Int == 2)
        // A floor no version meets is answered with the current row, not an error.
        let beyond = service.get(id, query: "?min_version=2147483647")
        #expect(beyond.status == .ok)
        #expect(beyond.json?["version"] as? Int == 2)
    }

    @Test func anIfNoneMatchListRevalidatesAgainstTheCurrentVersion() {
        let id = InProcessService.newID()
        service.create(id)
        #expect(service.put(id, #"{"display_name":"Second","version":1}"#, token: service.token(for: id)).status == .ok)
        let listed = service.get(id, headers: ["If-None-Match": #""1", "2""#])
        #expect(listed.status == .notModified)
        #expect(listed.headers["ETag"] == #""2""#)
        let older = service.get(id, headers: ["If-None-Match": #""1""#])
        #expect(older.status == .ok)
        #expect(older.json?["version"] as? Int == 2)
    }

    @Test func anEventStreamOfAnUnknownProfileIs404AndOfAKnownOneOnlyGETs() {
        let missing = service.request(.get, "/users/profile/\(InProcessService.newID())/events")
        #expect(missing.status == .notFound)
        #expect(missing.problemKind == "profile-not-found")
        let id = InProcessService.newID()
        service.create(id)
        let put = service.request(.put, "/users/profile/\(id)/events")
        #expect(put.status == .methodNotAllowed)
        #expect(put.problemKind == "method-not-allowed")
        #expect(put.headers["Allow"] != nil)
    }

    @Test func aHeadOfAnUnknownProfileIs404() {
        // Its body is the problem document's length; the server sends the head alone
        // (HTTPServerTests).
        let head = service.request(.head, "/users/profile/\(InProcessService.newID())")
        #expect(head.status == .notFound)
        #expect(head.problemKind == "profile-not-found")
    }
}

/// PostgreSQL unavailable (an in-memory database of the test's own, failed): what readers,
/// writers and the readiness probe are answered.
@Suite struct ProfileUnavailableRouteTests {
    @Test func readsOfCachedProfilesGoOnAndTheRestAre503WithRetryAfter() throws {
        let database = InMemoryDatabase()
        let service = try InProcessService(database: database)
        let cached = InProcessService.newID()
        let uncached = InProcessService.newID()
        service.create(cached)
        service.create(uncached)
        _ = service.get(cached)
        _ = InMemoryBackends.cluster.client().delete(ProfileCacheEntries.key(for: uncached))

        database.setUnavailable(true)
        #expect(service.get(cached).status == .ok, "a hit needs no database")
        let miss = service.get(uncached)
        #expect(miss.status == .serviceUnavailable)
        #expect(miss.problemKind == "database-unavailable")
        #expect(miss.headers["Retry-After"] == "1")
        let write = service.put(cached, #"{"display_name":"No","version":1}"#, token: service.token(for: cached))
        #expect(write.status == .serviceUnavailable)

        database.setUnavailable(false)
        #expect(service.get(uncached).status == .ok)
        #expect(service.get(cached).json?["display_name"] as? String == "First", "the refused write changed nothing")
    }

    @Test func readinessSaysTheDatabaseIsDown() throws {
        let database = InMemoryDatabase()
        let service = try InProcessService(database: database)
        database.setUnavailable(true)
        let ready = service.request(.get, "/readyz")
        #expect(ready.status == .serviceUnavailable)
        #expect(ready.json?["database"] as? String == "down", "\(ready.bodyText)")
        #expect(service.request(.get, "/healthz").status == .ok, "liveness does not depend on the database")
    }
}
