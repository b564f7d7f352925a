import HTTP1
import Testing

@testable import ProfileService

@Suite struct LiveUpdatesInputTests {
    @Test func changePayloadsParseInOrderAndSkipMalformedPairs() {
        let pairs = ProfileChangePayload.parse("42:7,43:0,x:1,44:,:3,45:1:2,0:1,46:-1,9223372036854775807:2147483647,47:2147483648")
        #expect(pairs.map(\.id) == [42, 43, Int64.max])
        #expect(pairs.map(\.version) == [7, 0, Int32.max])
        #expect(ProfileChangePayload.parse("").isEmpty)
        #expect(ProfileChangePayload.format([(1, 2), (3, 4)]) == "1:2,3:4")
    }

    @Test(arguments: [("7", Int32(7)), (" 0 ", Int32(0)), ("2147483647", Int32.max)])
    func lastEventIDs(text: String, version: Int32) throws {
        #expect(try ProfileResponder.lastEventID(text) == version)
    }

    @Test(arguments: ["", "-1", "+1", "1.0", "seven", "2147483648", "99999999999", "5708148850", "007", "00"])
    func malformedLastEventIDsAre400(text: String) {
        do {
            _ = try ProfileResponder.lastEventID(text)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.status.code == 400)
            #expect(error.field == "Last-Event-ID")
        }
    }

    @Test func anEventIsOneSSEBlockWithGETsJSON() {
        let profile = Profile(id: 42, username: "ada", displayName: "Ada\nLovelace", version: 3, updatedAt: "2026-01-01T00:00:00Z")
        let text = String(decoding: ProfileEvent.bytes(version: 3, json: profile.ownerJSON), as: UTF8.self)
        let json = String(decoding: profile.ownerJSON, as: UTF8.self)
        #expect(text == "event: profile\nid: 3\ndata: \(json)\n\n")
        #expect(!json.contains("\n"), "a line break in the JSON would split the data field")
    }

    @Test func acceptHeaderSelectsTheStream() {
        func accepts(_ value: String?) -> Bool {
            var request = HTTPRequest(method: .get, target: "/users/profile/1", version: .http1_1)
            if let value { request.headers.add(name: "Accept", value: value) }
            return ProfileResponder.acceptsEventStream(request)
        }
        #expect(accepts("text/event-stream"))
        #expect(accepts("application/json, Text/Event-Stream; q=0.5"))
        #expect(!accepts("application/json"))
        #expect(!accepts(nil))
    }
}
