import Foundation
import Testing

@testable import ProfileClient
import ProfileClientTesting

/// Profiles by username: the lookup and its redirects, the list, renames through a patch and
/// through the event stream.
@Suite(.timeLimit(.minutes(1))) struct HandlesTests {
    static func profile(_ id: Int64, _ username: String, version: Int32) -> Profile {
        Profile(
            id: id, username: username, displayName: "Name \(id)", version: version,
            updatedAt: Date(timeIntervalSince1970: 1_767_225_600 + Double(version)))
    }

    static func list(_ profiles: [Profile], missing: [String] = [], renamed: [String: String] = [:])
        -> TransportResponse
    {
        let object: [String: Any] = [
            "profiles": profiles.map { try! JSONSerialization.jsonObject(with: JSONEncoder().encode($0)) },
            "missing": missing, "renamed": renamed,
        ]
        return TransportResponse(
            status: 200, headers: ["content-type": "application/json"],
            body: try! JSONSerialization.data(withJSONObject: object))
    }

    static func redirect(to location: String) -> TransportResponse {
        TransportResponse(status: 308, headers: ["location": location, "cache-control": "no-cache"])
    }

    @Test func aLookupReadsTheProfileAndKeepsItByIDAsAFetchDoes() async throws {
        let ada = Self.profile(42, "Ada", version: 3)
        let transport = FakeTransport { request, _ in
            if request.url.path == "/users/by-username/ada" { return FakeTransport.json(ada) }
            return TransportResponse(status: 304, headers: ["etag": "\"3\""])
        }
        let client = FakeTransport.client(transport)
        #expect(try await client.fetch(username: "ada") == ada)
        #expect(await client.cache.confirmedProfile(id: 42) == ada)
        // Read by id afterwards: the id's floor and its version, as for any profile the client holds.
        #expect(try await client.fetch(id: 42) == ada)
        #expect(transport.requests.map(\.method) == ["GET", "GET"])
        #expect(transport.requests[1].url.query == "min_version=3")
        #expect(transport.requests[1].headers["If-None-Match"] == "\"3\"", "an answer without a tag: its version's")
    }

    @Test func aLookupFollowsTheRedirectOfARenameToTheProfileNow() async throws {
        let renamed = Self.profile(42, "ada_l", version: 4)
        let transport = FakeTransport { request, _ in
            switch request.url.path {
            case "/users/by-username/ada": return Self.redirect(to: "/users/by-username/ada_l")
            case "/users/by-username/ada_l": return FakeTransport.json(renamed)
            default: return FakeTransport.problem(404, kind: "profile-not-found")
            }
        }
        let client = FakeTransport.client(transport)
        #expect(try await client.fetch(username: "ada") == renamed)
        #expect(transport.requests.map(\.url.path) == ["/users/by-username/ada", "/users/by-username/ada_l"])
        #expect(await client.cache.confirmedProfile(id: 42) == renamed)
    }

    /// The status of a lookup's redirect the client does not follow, if it threw one.
    static func refusedRedirect(_ transport: FakeTransport, _ username: String) async -> Int? {
        do {
            _ = try await FakeTransport.client(transport).fetch(username: username)
            return nil
        } catch {
            guard case .unexpectedStatus(let status, _) = error else { return nil }
            return status
        }
    }

    @Test func aRedirectElsewhereOrOneThatNeverEndsIsRefused() async {
        let looping = FakeTransport { request, _ in
            let next = request.url.path == "/users/by-username/one" ? "two" : "one"
            return Self.redirect(to: "/users/by-username/\(next)")
        }
        #expect(await Self.refusedRedirect(looping, "one") == 308)
        #expect(looping.requests.count == ProfileClient.maximumUsernameRedirects + 1)

        let elsewhere = FakeTransport { _, _ in Self.redirect(to: "https://elsewhere.test/users/by-username/ada") }
        #expect(await Self.refusedRedirect(elsewhere, "ada") == 308)
        #expect(elsewhere.requests.count == 1)
    }

    @Test func aUsernameNoOneHoldsIsNotFound() async throws {
        let transport = FakeTransport { _, _ in FakeTransport.problem(404, kind: "profile-not-found") }
        await #expect(throws: ProfileClientError.notFound) {
            try await FakeTransport.client(transport).fetch(username: "nobody")
        }
        do {
            _ = try await FakeTransport.client(transport).fetch(username: "..")
            Issue.record("a username that cannot be a path segment was looked up")
        } catch {
            guard case .validation(field: "username", _) = error else { throw error }
        }
        #expect(transport.requests.count == 1, "a username that cannot be a path segment is not sent")
    }

    /// The id's read-your-writes floor, once the client knows which id holds the username: passed
    /// as `min_version`, and an answer below it read again by id.
    @Test func aLookupNeverAnswersOlderThanTheClientKnowsOfTheID() async throws {
        let seen = Self.profile(42, "ada", version: 5)
        let transport = FakeTransport { request, _ in
            let byUsername = request.url.path.hasPrefix("/users/by-username/")
            return FakeTransport.json(byUsername ? Self.profile(42, "ada", version: 4) : seen)
        }
        let client = FakeTransport.client(transport)
        await client.cache.didFetch(seen)
        #expect(try await client.fetch(username: "ADA") == seen)
        #expect(transport.requests.map(\.url.path) == ["/users/by-username/ADA", "/users/profile/42"])
        #expect(transport.requests[0].url.query == "min_version=5")
        #expect(transport.requests[1].url.query == "min_version=5")
    }

    @Test func aRenameThisClientWroteAnswersItsLookupsWithoutANetworkCall() async throws {
        let renamed = Self.profile(42, "Ada_L", version: 2)
        let transport = FakeTransport { request, _ in
            #expect(request.method == "PATCH")
            #expect(request.headers["Content-Type"] == "application/merge-patch+json")
            #expect(String(decoding: request.body ?? Data(), as: UTF8.self) == #"{"username":"Ada_L"}"#)
            return FakeTransport.json(renamed)
        }
        let client = FakeTransport.client(transport)
        await client.cache.didFetch(Self.profile(42, "ada", version: 1))
        #expect(try await client.edit(id: 42, ProfileChanges(username: "Ada_L")) == renamed)
        #expect(try await client.fetch(username: "ada_l") == renamed)
        #expect(transport.requests.count == 1)
    }

    @Test func aRenameToAUsernameTakenIsRefusedAndRolledBack() async throws {
        let ada = Self.profile(42, "ada", version: 1)
        let answer = Gate()
        let transport = FakeTransport { _, _ in
            await answer.wait()
            return FakeTransport.problem(409, kind: "username-taken", field: "username")
        }
        let client = FakeTransport.client(transport)
        await client.cache.didFetch(ada)
        let rename = Task { () throws(ProfileClientError) -> Profile in try await client.edit(id: 42, ProfileChanges(username: "bob")) }
        while await client.cache.records[42]?.shown?.isPending != true { await Task.yield() }
        #expect(await client.cache.records[42]?.shown?.profile.username == "bob", "shown at once, pending")
        answer.open()
        await #expect(throws: ProfileClientError.usernameTaken) { try await rename.value }
        #expect(await client.cache.records[42]?.shown?.profile == ada, "the username it has is shown again")
    }

    @Test func theListGivesProfilesMissingUsernamesAndRenames() async throws {
        let ada = Self.profile(42, "ada_l", version: 2)
        let bob = Self.profile(7, "bob", version: 1)
        let transport = FakeTransport { _, _ in Self.list([ada, bob], missing: ["nobody"], renamed: ["ada": "ada_l"]) }
        let client = FakeTransport.client(transport)
        let found = try await client.profiles(usernames: ["ADA", "bob", "Nobody", "BOB"])
        // The service names the missing and renamed ones by handle; the client as they were asked.
        #expect(found == ProfilesByUsername(profiles: [ada, bob], missing: ["Nobody"], renamed: ["ADA": "ada_l"]))
        #expect(transport.requests.count == 1)
        #expect(transport.requests[0].url.path == "/users/profiles")
        #expect(transport.requests[0].url.query == "usernames=ADA,bob,Nobody", "each username once, without case")
        #expect(await client.cache.confirmedProfile(id: 42) == ada)
        #expect(await client.cache.confirmedProfile(id: 7) == bob)
    }

    @Test func aListedProfileOlderThanTheClientKnowsIsReadAgainByID() async throws {
        let newer = Self.profile(42, "ada_3", version: 3)
        let transport = FakeTransport { request, _ in
            let byUsername = request.url.query?.hasPrefix("usernames=") == true
            return Self.list([byUsername ? Self.profile(42, "ada", version: 1) : newer])
        }
        let client = FakeTransport.client(transport)
        await client.cache.didFetch(newer)
        let found = try await client.profiles(usernames: ["ada"])
        #expect(found == ProfilesByUsername(profiles: [newer], missing: [], renamed: ["ada": "ada_3"]))
        #expect(transport.requests.map(\.url.query) == ["usernames=ada", "ids=42@3"])
    }

    /// A rename made anywhere reaches an observer of the id as any change does: its profile with
    /// the new username; and a lookup of that username then passes the id's floor.
    @Test func aRenameIsSeenOnTheUpdatesOfTheID() async throws {
        let before = Self.profile(42, "ada", version: 1)
        let after = Self.profile(42, "ada_l", version: 2)
        let events = FakeEventTransport([[FakeEventTransport.event(before), FakeEventTransport.event(after)]])
        let transport = FakeTransport { request, _ in
            FakeTransport.json(request.url.path.hasPrefix("/users/by-username/") ? after : before)
        }
        let client = ProfileClient(
            configuration: ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!), transport: transport,
            eventTransport: events, randomUnit: { 0 })
        let seen = await ProfileClientLiveUpdatesTests.collect(client.updates(for: 42), count: 2)
        #expect(seen.map(\.username) == ["ada", "ada_l"])
        #expect(try await client.fetch(username: "ada_l") == after)
        let lookup = transport.requests.first { $0.url.path == "/users/by-username/ada_l" }
        #expect(lookup?.url.query == "min_version=2")
    }

    /// The in-memory service keeps the service's rules: lookups, redirects from a username given
    /// up, which no one else may take, and the list.
    @Test func theInMemoryServiceFindsRenamesAndKeepsUsernamesGivenUp() async throws {
        let service = InMemoryProfileService(profiles: [
            Self.profile(1, "ada", version: 1), Self.profile(2, "bob", version: 1),
        ])
        let client = ProfileClient(
            configuration: ProfileClientConfiguration(baseURL: URL(string: "http://preview.invalid")!), transport: service,
            eventTransport: nil)
        #expect(try await client.fetch(username: "Ada").id == 1)
        #expect(try await client.edit(id: 1, ProfileChanges(username: "ada_l")).username == "ada_l")
        let found = try await client.fetch(username: "ada", policy: .reloadFromServer)
        #expect(found.id == 1 && found.username == "ada_l")
        await #expect(throws: ProfileClientError.usernameTaken) { try await client.edit(id: 2, ProfileChanges(username: "ADA")) }
        await #expect(throws: ProfileClientError.usernameTaken) { try await client.edit(id: 2, ProfileChanges(username: "ada_l")) }
        #expect(try await client.edit(id: 1, ProfileChanges(username: "ada")).username == "ada", "its owner takes it back")
        let list = try await client.profiles(usernames: ["Ada_L", "bob", "Zed"])
        #expect(list.profiles.map(\.id) == [1, 2] && list.missing == ["Zed"] && list.renamed == ["Ada_L": "ada"])
        await #expect(throws: ProfileClientError.notFound) { try await client.fetch(username: "zed") }
    }
}
