import Foundation
import HTTP1
import ProfileService
import ProfileServiceTesting
import TestSupport
import Testing

/// `GET /users/profiles/events?ids=…`, answered in process: the first bytes (each member above its
/// floor, a `deleted` event for an absent one), the subscriptions handed to the server, and the
/// 400s. The live part runs against the real servers (ListsEndToEndTests).
@Suite struct ProfileListStreamRouteTests {
    let service: InProcessService

    init() throws {
        service = try InProcessService()
    }

    private func events(_ response: HTTPResponse) -> [String] {
        response.bodyText.components(separatedBy: "\n\n").filter { $0.hasPrefix("event:") }
    }

    @Test func theFirstBytesAreEachMemberAboveItsFloorInOrderAndTheAbsentOnesAsDeleted() throws {
        let ids = (0..<3).map { _ in InProcessService.newID() }
        for id in ids { service.create(id) }
        let absent = InProcessService.newID()
        var request = HTTPRequest(
            method: .get, target: "/users/profiles/events?ids=\(ids[2]),\(absent),\(ids[0])@1,\(ids[1]),\(ids[2])")
        request.peerAddress = "192.0.2.7"
        let opened = service.respond(to: request)
        #expect(opened.status == .ok)
        #expect(opened.headers["Content-Type"] == "text/event-stream")
        #expect(opened.bodyText.hasPrefix("retry: "))
        let single = service.get(ids[2]).bodyText
        #expect(
            events(opened) == [
                "event: profile\nid: 1\ndata: \(single)",
                "event: deleted\ndata: {\"id\":\(absent),\"version\":0}",
                "event: profile\nid: 1\ndata: \(service.get(ids[1]).bodyText)",
            ], "in order, a repeated id once, the member at its floor left out")
        let stream = try #require(opened.eventStream)
        #expect(stream.subscriptions.map(\.topic) == [ids[2], absent, ids[0], ids[1]])
        #expect(stream.subscriptions.map(\.position) == [1, 0, 1, 1])
        #expect(!stream.endsWithTopic, "a member's deletion does not end the list's stream")
        #expect(stream.client == "addr:192.0.2.7")
    }

    @Test func aFloorAboveWhatPostgreSQLHasIsWhereTheStreamStarts() throws {
        let id = InProcessService.newID()
        service.create(id)
        let opened = service.request(.get, "/users/profiles/events?ids=\(id)@9")
        #expect(opened.status == .ok)
        #expect(events(opened).isEmpty, "the client holds version 9 already")
        #expect(opened.eventStream?.subscriptions.first?.position == 9, "only versions above 9 are sent")
    }

    @Test func aThousandIdsAreOneStreamAndMoreAreRefusedNamingTheField() {
        let thousand = (1...1_000).map { String(9_000_000 + $0) }.joined(separator: ",")
        let opened = service.request(.get, "/users/profiles/events?ids=\(thousand)")
        #expect(opened.status == .ok)
        #expect(opened.eventStream?.subscriptions.count == 1_000)
        #expect(events(opened).count == 1_000, "each absent member is a deleted event")
        for ids in [thousand + ",42", "", "1,,2", "0", "1@0", "x", "01"] {
            let refused = service.request(.get, "/users/profiles/events?ids=\(ids)")
            #expect(refused.status == .badRequest, "ids=\(ids.prefix(20))")
            #expect(refused.problemKind == "invalid-ids")
            #expect(refused.json?["field"] as? String == "ids")
        }
        let unnamed = service.request(.get, "/users/profiles/events")
        #expect(unnamed.status == .badRequest)
        #expect(unnamed.problemKind == "invalid-ids")
        let put = service.request(.put, "/users/profiles/events?ids=1")
        #expect(put.status == .methodNotAllowed)
        #expect(put.headers["Allow"] == "GET")
    }
}
