import Foundation
import HTTP1
import ProfileService
import ProfileServiceTesting
import Testing

/// Every route's statuses, headers and problem documents, answered in process (no socket, no
/// servers): the contract of openapi.yaml at unit-test speed. The wire is HTTPServerTests' job,
/// the real stack the end-to-end tests'.
@Suite struct ProfileRouteTests {
    let service: InProcessService

    init() throws {
        service = try InProcessService()
    }

    @Test func aCreatedProfileIsReadWithItsETagAndRevalidated() {
        let id = InProcessService.newID()
        let created = service.create(id, displayName: "Ada")
        #expect(created.status == .created)
        #expect(created.headers["Location"] == "/users/profile/\(id)")
        #expect(created.headers["ETag"] == #""1""#)
        #expect(created.json?["display_name"] as? String == "Ada")

        let read = service.get(id)
        #expect(read.status == .ok)
        #expect(read.headers["ETag"] == #""1""#)
        #expect(read.headers["Content-Type"] == "application/json")
        #expect(read.headers["Cache-Control"] == "no-cache")
        #expect(read.headers["X-Request-ID"] != nil)
        #expect(read.json?["version"] as? Int == 1)

        let revalidated = service.get(id, headers: ["If-None-Match": #""1""#])
        #expect(revalidated.status == .notModified)
        #expect(revalidated.body.isEmpty)

        let head = service.request(.head, "/users/profile/\(id)")
        #expect(head.status == .ok)
        #expect(head.headers["ETag"] == #""1""#)
    }

    @Test func anUpdateAnswersTheWholeNewProfileAndAConflictTheCurrentOne() {
        let id = InProcessService.newID()
        service.create(id)
        let owner = service.token(for: id)
        let updated = service.put(id, #"{"display_name":"Second","version":1}"#, token: owner)
        #expect(updated.status == .ok)
        #expect(updated.json?["version"] as? Int == 2)
        #expect(updated.json?["display_name"] as? String == "Second")
        #expect(service.get(id).json?["display_name"] as? String == "Second", "read-your-writes")

        let stale = service.put(id, #"{"display_name":"Third","version":1}"#, token: owner)
        #expect(stale.status == .conflict)
        #expect(stale.problemKind == "version-conflict")
        #expect((stale.json?["current"] as? [String: Any])?["version"] as? Int == 2)

        let ifMatch = service.put(id, #"{"display_name":"Third"}"#, token: owner, headers: ["If-Match": #""2""#])
        #expect(ifMatch.status == .ok)
        let neither = service.put(id, #"{"display_name":"Fourth"}"#, token: owner)
        #expect(neither.status.code == 428)
        #expect(neither.problemKind == "precondition-required")
    }

    @Test func writesNeedTheOwnersOrAnAdminsToken() {
        let id = InProcessService.newID()
        service.create(id)
        let body = #"{"display_name":"Other","version":1}"#
        let missing = service.put(id, body, token: nil)
        #expect(missing.status == .unauthorized)
        #expect(missing.problemKind == "unauthenticated")
        #expect(missing.headers["WWW-Authenticate"] == #"Bearer realm="profile-service""#)
        let invalid = service.put(id, body, token: "not.a.token")
        #expect(invalid.status == .unauthorized)
        #expect(invalid.problemKind == "invalid-token")
        let stranger = service.put(id, body, token: service.token(for: id + 1))
        #expect(stranger.status == .forbidden)
        #expect(stranger.problemKind == "forbidden")
        let admin = service.put(id, body, token: service.token(for: 1, scope: "profiles:admin"))
        #expect(admin.status == .ok)
        let twice = service.request(
            .get, "/users/profile/\(id)", headers: ["Authorization": "Bearer a", "authorization": "Bearer b"])
        #expect(twice.status == .badRequest)
        #expect(twice.problemKind == "duplicate-authorization")
    }

    @Test func aWriteIsRefusedOnItsHeadBeforeItsBody() {
        let id = InProcessService.newID()
        let head = HTTPRequest(method: .put, target: "/users/profile/\(id)", headers: ["Content-Length": "3000"])
        #expect(service.responder.screen(head: head)?.status == .unauthorized)
        var owned = head
        owned.headers.add(name: "Authorization", value: "Bearer \(service.token(for: id))")
        #expect(service.responder.screen(head: owned) == nil, "the owner's write goes on to its body")
        let read = HTTPRequest(method: .get, target: "/users/profile/\(id)")
        #expect(service.responder.screen(head: read) == nil)
    }

    @Test(arguments: [
        ("/users/profile/0", "invalid-id"), ("/users/profile/-1", "invalid-id"), ("/users/profile/007", "invalid-id"),
        ("/users/profile/1?min_version=0", "invalid-min-version"),
        ("/users/profile/1?min_version=x", "invalid-min-version"),
    ])
    func badReadsAre400NamingTheField(target: String, kind: String) {
        let response = service.request(.get, target)
        #expect(response.status == .badRequest)
        #expect(response.problemKind == kind)
        #expect(response.headers["Content-Type"] == "application/problem+json")
        #expect(response.json?["field"] != nil)
    }

    @Test(arguments: [
        (#"{"display_name":"","version":1}"#, "invalid-field"),
        (#"{"display_name":"\#(String(repeating: "\u{FB2C}", count: 64))","version":1}"#, "invalid-field"),
        (#"{"version":1}"#, "missing-field"),
        (#"{not json"#, "malformed-request"),
    ])
    func badWritesAreRefusedAndChangeNothing(body: String, kind: String) {
        let id = InProcessService.newID()
        service.create(id, displayName: "Kept")
        let response = service.put(id, body, token: service.token(for: id))
        #expect(response.status.code >= 400 && response.status.code < 500)
        #expect(response.problemKind == kind, "\(response.bodyText)")
        #expect(service.get(id).json?["display_name"] as? String == "Kept")
    }

    @Test func routesAndMethods() {
        let id = InProcessService.newID()
        #expect(service.get(id).status == .notFound)
        #expect(service.get(id).problemKind == "profile-not-found")
        let unknown = service.request(.get, "/users/nobody")
        #expect(unknown.status == .notFound)
        #expect(unknown.problemKind == "no-such-route")
        let post = service.request(.post, "/users/profile/\(id)")
        #expect(post.status == .methodNotAllowed)
        #expect(post.headers["Allow"] == "GET, HEAD, PUT, PATCH, DELETE")
        #expect(service.request(.post, "/healthz").headers["Allow"] == "GET, HEAD")
        let health = service.request(.get, "/healthz")
        #expect(health.status == .ok)
        #expect(health.headers["Cache-Control"] == "no-store")
        let ready = service.request(.get, "/readyz")
        #expect(ready.status == .ok)
        #expect(ready.json?["database"] as? String == "up")
        #expect(service.request(.get, "/metrics").status == .notFound, "no renderer configured")
        let echoed = service.request(.get, "/healthz", headers: ["X-Request-ID": "abc-123"])
        #expect(echoed.headers["X-Request-ID"] == "abc-123")
    }

    @Test func anEventStreamAnswersItsFirstBytesAndLimitsEachClient() throws {
        let id = InProcessService.newID()
        service.create(id)
        var request = HTTPRequest(method: .get, target: "/users/profile/\(id)/events")
        request.peerAddress = "192.0.2.1"
        let opened = service.respond(to: request)
        #expect(opened.status == .ok)
        #expect(opened.headers["Content-Type"] == "text/event-stream")
        #expect(opened.eventStream?.topic == id)
        #expect(opened.eventStream?.client == "addr:192.0.2.1")
        #expect(opened.bodyText.contains("event: profile"))
        let resumed = service.respond(
            to: HTTPRequest(method: .get, target: "/users/profile/\(id)/events", headers: ["Last-Event-ID": "1"]))
        #expect(!resumed.bodyText.contains("event: profile"), "nothing newer than what the client has")
        let bad = service.request(.get, "/users/profile/\(id)/events", headers: ["Last-Event-ID": "x"])
        #expect(bad.status == .badRequest)
        #expect(bad.problemKind == "invalid-last-event-id")
    }

    @Test func readsNeedATokenWhenConfigured() throws {
        let strict = try InProcessService(requireAuthForReads: true)
        let id = InProcessService.newID()
        strict.create(id)
        #expect(strict.get(id).status == .unauthorized)
        #expect(strict.get(id, headers: ["Authorization": "Bearer \(strict.token(for: 99))"]).status == .ok)
    }
}
