import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient
import ProfileClientTesting

/// What an app switches over when a request fails, what it may plug in instead of URLSession,
/// and that a view going away is not a failure.
@Suite(.timeLimit(.minutes(1))) struct ErrorsAndTransportsTests {
    static let id: Int64 = 9

    static func failing(_ kind: TransportError.Kind) -> FakeTransport {
        FakeTransport { _, _ throws(TransportError) in throw TransportError(kind: kind, description: "\(kind)") }
    }

    @Test func aRequestWithoutAnAnswerSaysWhy() async {
        let cases: [(TransportError.Kind, ProfileClientError)] = [
            (.offline, .offline), (.timedOut, .timedOut), (.tls, .tls("tls")), (.cancelled, .cancelled),
            (.connection, .transport("connection")),
        ]
        for (kind, expected) in cases {
            let client = FakeTransport.client(Self.failing(kind))
            await #expect(throws: expected) { try await client.fetch(id: Self.id) }
        }
        // Offline is not retried (nothing will change by itself); a timed-out read is.
        let offline = Self.failing(.offline)
        _ = try? await FakeTransport.client(offline).fetch(id: Self.id)
        #expect(offline.requests.count == 1)
        let timedOut = Self.failing(.timedOut)
        _ = try? await FakeTransport.client(timedOut).fetch(id: Self.id)
        #expect(timedOut.requests.count == 4, "reads retry a timeout up to the policy's attempts")
    }

    @Test func answersAnAppActsOnAreValuesWithTheirRetryAfter() {
        func error(_ status: Int, retryAfter: String? = nil) -> ProfileClientError {
            var response = FakeTransport.problem(status, kind: "x")
            if let retryAfter { response.headers["retry-after"] = retryAfter }
            return ProfileClient.error(for: response)
        }
        #expect(error(429, retryAfter: "7") == .rateLimited(retryAfter: .seconds(7)))
        #expect(error(500) == .serverError(status: 500, retryAfter: nil, detail: "x"))
        #expect(error(502, retryAfter: "3") == .serverError(status: 502, retryAfter: .seconds(3), detail: "x"))
        #expect(error(503) == .unavailable(retryAfter: nil))
    }

    @Test func readsRetryAGatewaysBadGatewayAndServerErrorWhileAnInstanceRestarts() async throws {
        let transport = FakeTransport { _, index throws(TransportError) in
            index <= 2 ? FakeTransport.problem(index == 1 ? 502 : 500, kind: "x")
                : FakeTransport.json(FakeTransport.profile(Self.id, "Back", version: 1))
        }
        let profile = try await FakeTransport.client(transport).fetch(id: Self.id)
        #expect(profile.displayName == "Back")
        #expect(transport.requests.count == 3)
    }

    @Test func anAnswerThatDoesNotDecodeNamesTheMemberAtFault() async {
        let transport = FakeTransport { _, _ throws(TransportError) in
            TransportResponse(
                status: 200, headers: ["content-type": "application/json"],
                body: Data(#"{"id":9,"username":"u","display_name":"N","version":"two","updated_at":"x"}"#.utf8))
        }
        do {
            _ = try await FakeTransport.client(transport).fetch(id: Self.id)
            Issue.record("decoded a version that is a string")
        } catch {
            guard case .decoding(let field, _) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(field == "version")
        }
    }

    @Test func cancellingTheCallerIsCancelledNotAFailure() async {
        let started = Gate()
        let transport = FakeTransport { _, _ throws(TransportError) in
            started.open()
            try? await Task.sleep(for: .seconds(30))
            throw TransportError(kind: .cancelled, description: "cancelled")
        }
        let client = FakeTransport.client(transport)
        let read = Task { () throws(ProfileClientError) -> Profile in try await client.fetch(id: Self.id) }
        await started.wait()
        read.cancel()
        await #expect(throws: ProfileClientError.cancelled) { try await read.value }
        #expect(transport.requests.count == 1, "a cancelled read is not retried")
    }

    @Test func anAppSuppliedTransportServesEveryCall() async throws {
        let service = InMemoryProfileService(profiles: [FakeTransport.profile(Self.id, "Ada", version: 1)])
        let client = ProfileClient(
            configuration: ProfileClientConfiguration(baseURL: URL(string: "http://preview.invalid")!), transport: service,
            eventTransport: nil)
        #expect(try await client.fetch(id: Self.id).displayName == "Ada")
        let renamed = try await client.edit(id: Self.id, ProfileChanges(displayName: "Ada L"))
        #expect(renamed.version == 2 && service.profiles[Self.id]?.displayName == "Ada L")
        // A change "on another device", then a stale edit: the in-memory service refuses it as the real one does.
        service.store(FakeTransport.profile(Self.id, "Elsewhere", version: 3))
        await #expect(throws: ProfileClientError.conflict(current: FakeTransport.profile(Self.id, "Elsewhere", version: 3))) {
            try await client.edit(id: Self.id, ProfileChanges(displayName: "Stale"), expectedVersion: 2)
        }
        let created = try await client.create(id: 10, username: "grace", displayName: "Grace")
        #expect(created.version == 1)
        let list = try await client.profiles(ids: [Self.id, 10, 11])
        #expect(list.profiles.map(\.id) == [Self.id, 10] && list.missing == [11])
        await #expect(throws: ProfileClientError.notFound) { try await client.fetch(id: 11) }
        #expect(service.receivedRequests.allSatisfy { $0.url.host == "preview.invalid" })
        #expect(service.receivedRequests.count == 6, "fetch, edit, stale edit, creation, list, 404")
    }

    /// An edit without a version goes over another device's change of other members (no
    /// conflict: the service's 409 teaches the client the new version, and the edit is sent over
    /// it); with `expectedVersion` it applies to that version only.
    @Test func anEditGoesOverOtherMembersChangesUnlessItNamesAVersion() async throws {
        let service = InMemoryProfileService(profiles: [FakeTransport.profile(Self.id, "Ada", version: 4)])
        let client = ProfileClient(
            configuration: ProfileClientConfiguration(baseURL: URL(string: "http://preview.invalid")!), transport: service,
            eventTransport: nil)
        let edited = try await client.edit(id: Self.id, ProfileChanges(displayName: "Ada L"))
        #expect(edited.version == 5 && edited.displayName == "Ada L")
        #expect(service.receivedRequests.map(\.method) == ["GET", "PATCH"], "a profile never read is read first")
        #expect(service.receivedRequests.last?.headers["If-Match"] == "\"4\"")
        var elsewhere = edited
        (elsewhere.fields, elsewhere.version) = (["bio": "Elsewhere"], 6)
        service.store(elsewhere)  // another device set the bio
        let over = try await client.edit(id: Self.id, ProfileChanges(displayName: "Ada Lovelace"))
        #expect(over.version == 7 && over.displayName == "Ada Lovelace" && over.fields == ["bio": "Elsewhere"])
        #expect(service.receivedRequests.suffix(2).map { $0.headers["If-Match"] } == ["\"5\"", "\"6\""])
        await #expect(throws: ProfileClientError.conflict(current: service.profiles[Self.id]!)) {
            try await client.edit(id: Self.id, ProfileChanges(displayName: "Stale"), expectedVersion: 4)
        }
        #expect(try await client.edit(id: Self.id, ProfileChanges(displayName: "Named"), expectedVersion: 7).version == 8)
    }

    /// Profile fields through the client: decoded from every member that is not the profile's
    /// own, set and unset by a patch that leaves the rest, refused by name when undeclared.
    @Test func fieldsAreReadAndSetWithoutTouchingTheOthers() async throws {
        var ada = FakeTransport.profile(Self.id, "Ada", version: 4)
        ada.fields = ["bio": "Analyst", "location": "London"]
        let service = InMemoryProfileService(profiles: [ada])
        let client = ProfileClient(
            configuration: ProfileClientConfiguration(baseURL: URL(string: "http://preview.invalid")!), transport: service,
            eventTransport: nil)
        let json = #"{"id":7,"username":"ada","display_name":"Ada","bio":"Hi","avatar_url":null,"version":2,"updated_at":"2026-01-01T00:00:02Z"}"#
        let decoded = try JSONDecoder().decode(Profile.self, from: Data(json.utf8))
        #expect(decoded.fields == ["bio": "Hi"], "an unset field is absent")
        #expect(try JSONDecoder().decode(Profile.self, from: JSONEncoder().encode(decoded)) == decoded)

        let patched = try await client.edit(id: Self.id, ProfileChanges(fields: ["bio": "Poetical science", "location": nil]))
        #expect(patched.version == 5 && patched.fields == ["bio": "Poetical science"] && patched.displayName == "Ada")
        let request = try #require(service.receivedRequests.last)
        #expect(request.method == "PATCH" && request.headers["Content-Type"] == "application/merge-patch+json")
        let body = try #require(request.body.flatMap { try JSONSerialization.jsonObject(with: $0) as? [String: Any] })
        #expect(body["bio"] as? String == "Poetical science" && body["location"] is NSNull && body.count == 2)
        #expect(try await client.fetch(id: Self.id).fields == ["bio": "Poetical science"], "the client reads its own write")
        await #expect(throws: ProfileClientError.self) { try await client.edit(id: Self.id, ProfileChanges(fields: ["pronouns": "she/her"])) }
        await #expect(throws: ProfileClientError.conflict(current: service.profiles[Self.id]!)) {
            try await client.edit(id: Self.id, ProfileChanges(fields: ["bio": "Stale"]), expectedVersion: 4)
        }
        let both = try await client.edit(id: Self.id, ProfileChanges(displayName: "Ada L", fields: ["website": "https://example.com/ada"]))
        #expect(both.displayName == "Ada L" && both.fields == ["bio": "Poetical science", "website": "https://example.com/ada"])
    }

    /// Deleting through the client: a stale `expectedVersion` is a conflict that teaches the
    /// client the current profile; the deletion shows `deleted` at once; a second is `notFound`;
    /// created again, the profile continues its versions.
    @Test func aDeletionIsShownAtOnceAndAProfileCreatedAgainContinues() async throws {
        let service = InMemoryProfileService(profiles: [FakeTransport.profile(Self.id, "Ada", version: 2)])
        let client = ProfileClient(
            configuration: ProfileClientConfiguration(baseURL: URL(string: "http://preview.invalid")!), transport: service,
            eventTransport: nil)
        await #expect(throws: ProfileClientError.conflict(current: FakeTransport.profile(Self.id, "Ada", version: 2))) {
            try await client.delete(id: Self.id, expectedVersion: 1)
        }
        var events = client.events(for: Self.id).makeAsyncIterator()
        #expect(await events.next() == .updated(FakeTransport.profile(Self.id, "Ada", version: 2)), "the 409 taught it v2")
        try await client.delete(id: Self.id, expectedVersion: 2)
        #expect(await events.next() == .deleted(id: Self.id))
        #expect(service.profiles[Self.id] == nil)
        #expect(service.receivedRequests.last?.headers["If-Match"] == "\"2\"")
        await #expect(throws: ProfileClientError.notFound) { try await client.delete(id: Self.id) }
        let again = try await client.create(id: Self.id, username: "ada", displayName: "Ada again")
        #expect(again.version == 3)
        #expect(await events.next() == .updated(again))
    }
}
