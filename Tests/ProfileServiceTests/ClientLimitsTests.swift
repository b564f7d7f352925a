import HTTP1
import HTTPServer
import ProfileAuth
import Testing

@testable import ProfileService

/// The per-client bounds of docs/design.md §5.5 as pure rules: who a client is, how its streams
/// are counted, and which label a method gets.
@Suite struct ClientLimitsTests {
    func request(peer: String?, forwardedFor: [String] = []) -> HTTPRequest {
        var headers = HTTPHeaders()
        for value in forwardedFor { headers.add(name: "X-Forwarded-For", value: value) }
        var request = HTTPRequest(method: .get, target: "/users/profile/1/events", headers: headers)
        request.peerAddress = peer
        return request
    }

    @Test func withoutTrustedGatewaysTheSocketPeerIsTheClient() {
        let identity = ClientIdentity()
        #expect(identity.address(of: request(peer: "192.0.2.7", forwardedFor: ["10.0.0.1"])) == "192.0.2.7")
        #expect(identity.key(for: request(peer: "192.0.2.7"), token: nil) == "addr:192.0.2.7")
    }

    @Test func behindGatewaysOnlyTheEntriesTheyAppendedCount() {
        let one = ClientIdentity(trustedProxyHops: 1)
        // The client wrote "1.1.1.1" itself; the gateway appended what it saw.
        #expect(one.address(of: request(peer: "127.0.0.1", forwardedFor: ["1.1.1.1, 203.0.113.9"])) == "203.0.113.9")
        // Several fields are one list, in order (RFC 9110 §5.3).
        #expect(one.address(of: request(peer: "127.0.0.1", forwardedFor: ["1.1.1.1", "203.0.113.9"])) == "203.0.113.9")
        let two = ClientIdentity(trustedProxyHops: 2)
        #expect(two.address(of: request(peer: "127.0.0.1", forwardedFor: ["6.6.6.6, 203.0.113.9, 10.0.0.2"])) == "203.0.113.9")
        // Fewer entries than trusted hops: it did not come through them; the peer is all we know.
        #expect(two.address(of: request(peer: "127.0.0.1", forwardedFor: ["203.0.113.9"])) == "127.0.0.1")
        #expect(one.address(of: request(peer: "127.0.0.1")) == "127.0.0.1")
    }

    @Test func aTokenMakesTheSubjectTheClientAndKeysAreBounded() {
        let identity = ClientIdentity(trustedProxyHops: 1)
        let token = VerifiedToken(subject: "42")
        #expect(identity.key(for: request(peer: "127.0.0.1", forwardedFor: ["9.9.9.9"]), token: token) == "sub:42")
        let long = String(repeating: "a", count: 5000)
        #expect(identity.key(for: request(peer: "127.0.0.1", forwardedFor: [long]), token: nil).count <= 69)
        #expect(identity.key(for: request(peer: nil), token: VerifiedToken(subject: long)).count <= 132)
    }

    @Test func streamsAreCountedPerClientAndGivenBack() {
        var configuration = EventStreams.Configuration()
        configuration.maxSubscribersPerClient = 2
        let streams = EventStreams(configuration: configuration)
        #expect(streams.reserve(client: "a"))
        #expect(streams.reserve(client: "a"))
        #expect(!streams.reserve(client: "a"))
        #expect(streams.reserve(client: "b"), "another client is not affected")
        streams.retain(topic: 1)
        streams.release(topic: 1, client: "a")
        #expect(streams.openStreams(client: "a") == 1)
        #expect(streams.reserve(client: "a"))
        #expect(streams.statistics.subscribersRefusedPerClient == 1)

        configuration.maxSubscribersPerClient = 0
        let unlimited = EventStreams(configuration: configuration)
        #expect((0..<1000).allSatisfy { _ in unlimited.reserve(client: "a") })
    }

    @Test func methodLabelsAreAClosedSet() {
        for method in ["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"] {
            #expect(ServiceMetrics.methodLabel(method) == method)
        }
        for method in ["get", "XXXX", String(repeating: "Y", count: 8000), "PROPFIND", "BREW"] {
            #expect(ServiceMetrics.methodLabel(method) == "other")
        }
    }
}
