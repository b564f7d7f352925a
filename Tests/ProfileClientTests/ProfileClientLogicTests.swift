import Foundation
import Synchronization
import Testing

@testable import ProfileClient

/// The client's logic over a fake transport: retries, the local window, optimistic updates.
@Suite(.timeLimit(.minutes(1))) struct ProfileClientLogicTests {
    @Test func readsRetryOn503And504ThenSucceed() async throws {
        let transport = FakeTransport { _, index throws(TransportError) in
            switch index {
            case 1: return FakeTransport.problem(503, kind: "database-unavailable", headers: ["retry-after": "0"])
            case 2: return TransportResponse(status: 504, headers: [:], body: Data())
            case 3: throw TransportError(kind: .connection, description: "reset")
            default: return FakeTransport.json(FakeTransport.profile(7, "Seven", version: 3))
            }
        }
        let profile = try await FakeTransport.client(transport).fetch(id: 7)
        #expect(profile.version == 3)
        #expect(transport.requests.count == 4)
    }

    @Test func readsGiveUpAfterTheLastAttemptWithUnavailable() async {
        let transport = FakeTransport { _, _ in
            FakeTransport.problem(503, kind: "database-unavailable", headers: ["retry-after": "0"])
        }
        await #expect(throws: ProfileClientError.unavailable(retryAfter: .zero)) {
            try await FakeTransport.client(transport).fetch(id: 7)
        }
        #expect(transport.requests.count == 4)
    }

    @Test func writesRetryOnlyWhenTheRequestSurelyNeverLeft() async throws {
        let refusedOnce = FakeTransport { _, index throws(TransportError) in
            if index == 1 { throw TransportError(kind: .notSent, description: "refused") }
            return FakeTransport.json(FakeTransport.profile(7, "New", version: 2))
        }
        _ = try await FakeTransport.client(refusedOnce).edit(id: 7, ProfileChanges(displayName: "New"), expectedVersion: 1)
        #expect(refusedOnce.requests.count == 2)

        // A lost connection is not a refusal: the edit is kept and sent again (OfflineEditsTests).
        let failures: [Result<TransportResponse, TransportError>] = [
            .success(FakeTransport.problem(503, kind: "database-unavailable")),
            .success(FakeTransport.problem(422, kind: "invalid-field", field: "display_name")),
            .success(
                FakeTransport.problem(409, kind: "version-conflict", current: FakeTransport.profile(7, "Other", version: 5))
            ),
        ]
        for failure in failures {
            let transport = FakeTransport { _, _ throws(TransportError) in try failure.get() }
            await #expect(throws: ProfileClientError.self) {
                try await FakeTransport.client(transport).edit(id: 7, ProfileChanges(displayName: "New"), expectedVersion: 1)
            }
            #expect(transport.requests.count == 1)
        }
    }

    @Test func problemDocumentsBecomeTypedErrors() {
        let cases: [(TransportResponse, ProfileClientError)] = [
            (FakeTransport.problem(404, kind: "profile-not-found"), .notFound),
            (FakeTransport.problem(401, kind: "unauthorized"), .unauthorized),
            (FakeTransport.problem(403, kind: "forbidden"), .forbidden),
            (
                FakeTransport.problem(422, kind: "invalid-field", field: "display_name"),
                .validation(field: "display_name", detail: "invalid-field")
            ),
            (FakeTransport.problem(409, kind: "username-taken", field: "username"), .usernameTaken),
            (
                FakeTransport.problem(409, kind: "version-conflict", current: FakeTransport.profile(1, "A", version: 4)),
                .conflict(current: FakeTransport.profile(1, "A", version: 4))
            ),
            (FakeTransport.problem(503, kind: "x", headers: ["retry-after": "2"]), .unavailable(retryAfter: .seconds(2))),
            (FakeTransport.problem(500, kind: "internal-error"), .serverError(status: 500, retryAfter: nil, detail: "internal-error")),
            (FakeTransport.problem(418, kind: "teapot"), .unexpectedStatus(418, detail: "teapot")),
        ]
        for (response, expected) in cases {
            #expect(ProfileClient.error(for: response) == expected)
        }
    }

    @Test func localWriteAnswersInsideTheWindowThenReadsPassMinVersion() async throws {
        let clock = ManualInstant()
        let transport = FakeTransport { request, _ in
            if request.method == "PATCH" { return FakeTransport.json(FakeTransport.profile(9, "Mine", version: 4)) }
            return FakeTransport.json(FakeTransport.profile(9, "Mine", version: 4))
        }
        let client = FakeTransport.client(transport, clock: clock, window: .seconds(10))
        _ = try await client.edit(id: 9, ProfileChanges(displayName: "Mine"), expectedVersion: 3)
        #expect(try await client.fetch(id: 9).version == 4)
        #expect(transport.requests.count == 1)
        clock.advance(by: .seconds(11))
        #expect(try await client.fetch(id: 9).version == 4)
        #expect(transport.requests.count == 2)
        #expect(transport.requests[1].url.query == "min_version=4")
    }

    @Test func aLocalEntryNeverHidesANewerFetchedVersion() async throws {
        let transport = FakeTransport { request, _ in
            if request.method == "PATCH" { return FakeTransport.json(FakeTransport.profile(9, "Mine", version: 4)) }
            return FakeTransport.json(FakeTransport.profile(9, "Theirs", version: 6))
        }
        let client = FakeTransport.client(transport)
        _ = try await client.edit(id: 9, ProfileChanges(displayName: "Mine"), expectedVersion: 3)
        #expect(try await client.fetch(id: 9, policy: .reloadFromServer).version == 6)
        let next = try await client.fetch(id: 9)
        #expect(next.version == 6)
        #expect(next.displayName == "Theirs")
    }

    @Test func anEditMadeOverAPendingVersionWaitsForItAndTheLatestWins() async throws {
        let first = Gate()
        let later = Mutex(false)
        let transport = FakeTransport { request, _ in
            if request.method == "GET" {
                let isLater = later.withLock { $0 }
                return FakeTransport.json(FakeTransport.profile(5, isLater ? "Later" : "Base", version: isLater ? 4 : 1))
            }
            let body = String(decoding: request.body ?? Data(), as: UTF8.self)
            if body.contains("First") {
                await first.wait()
                return FakeTransport.json(FakeTransport.profile(5, "First", version: 2))
            }
            return FakeTransport.json(FakeTransport.profile(5, "Second", version: 3))
        }
        let client = FakeTransport.client(transport)
        _ = try await client.fetch(id: 5)
        var updates = client.updates(for: 5).makeAsyncIterator()
        #expect(await updates.next()?.displayName == "Base")

        let older = Task { try await client.edit(id: 5, ProfileChanges(displayName: "First"), expectedVersion: 1) }
        #expect(await updates.next()?.displayName == "First")  // optimistic, at once
        // At the version the pending one shows: sent once the first is written, never conflicting with it.
        let newer = Task { try await client.edit(id: 5, ProfileChanges(displayName: "Second"), expectedVersion: 2) }
        #expect(await updates.next()?.displayName == "Second")
        first.open()
        #expect(try await older.value.version == 2)
        #expect(try await newer.value.version == 3)
        #expect(transport.requests.map { $0.headers["If-Match"] } == [nil, "\"1\"", "\"2\""])
        // Second stays shown (pending over First's v2, then written): never back to First v2.
        var shown = await updates.next()
        while let profile = shown, profile != FakeTransport.profile(5, "Second", version: 3) {
            #expect(profile.displayName == "Second" && profile.version == 3)
            shown = await updates.next()
        }
        #expect(try await client.fetch(id: 5) == FakeTransport.profile(5, "Second", version: 3))
        later.withLock { $0 = true }
        #expect(try await client.fetch(id: 5, policy: .reloadFromServer).version == 4)
        #expect(await updates.next() == FakeTransport.profile(5, "Later", version: 4))
    }

    @Test func aConflictRollsBackToTheServersProfileAndAFailureToThePreviousOne() async throws {
        let transport = FakeTransport { request, index throws(TransportError) in
            if request.method == "GET" { return FakeTransport.json(FakeTransport.profile(3, "Base", version: 1)) }
            let body = String(decoding: request.body ?? Data(), as: UTF8.self)
            if body.contains("Refused") { return FakeTransport.problem(422, kind: "invalid-field", field: "display_name") }
            return FakeTransport.problem(
                409, kind: "version-conflict", current: FakeTransport.profile(3, "Server", version: 2))
        }
        let client = FakeTransport.client(transport)
        _ = try await client.fetch(id: 3)
        var updates = client.updates(for: 3).makeAsyncIterator()
        #expect(await updates.next()?.displayName == "Base")

        await #expect(throws: ProfileClientError.validation(field: "display_name", detail: "invalid-field")) {
            try await client.edit(id: 3, ProfileChanges(displayName: "Refused"), expectedVersion: 1)
        }
        #expect(await updates.next()?.displayName == "Refused")
        #expect(await updates.next()?.displayName == "Base")

        await #expect(throws: ProfileClientError.conflict(current: FakeTransport.profile(3, "Server", version: 2))) {
            try await client.edit(id: 3, ProfileChanges(displayName: "Mine"), expectedVersion: 1)
        }
        #expect(await updates.next()?.displayName == "Mine")
        #expect(await updates.next() == FakeTransport.profile(3, "Server", version: 2))
    }

    @Test func identicalReadsInFlightShareOneRequest() async throws {
        let answer = Gate()
        let transport = FakeTransport { _, _ throws(TransportError) in
            await answer.wait()
            return FakeTransport.json(FakeTransport.profile(8, "Eight", version: 1))
        }
        let client = FakeTransport.client(transport)
        let reads = (0..<5).map { _ in Task { try await client.fetch(id: 8) } }
        // Every read is waiting by now: the first reached the transport, the rest had 250 ms more
        // to join it (a store reads its file on first use, and a loaded machine is slow to start tasks).
        while transport.requests.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(250))
        answer.open()
        for read in reads { #expect(try await read.value == FakeTransport.profile(8, "Eight", version: 1)) }
        #expect(transport.requests.count == 1, "five views that appear together make one request")
        _ = try await client.fetch(id: 8, policy: .reloadFromServer)
        #expect(transport.requests.count == 2, "a read after the answer is sent anew")
    }

    @Test func theTokenProviderIsAskedForEveryAttempt() async throws {
        let asked = Mutex(0)
        let transport = FakeTransport { request, index throws(TransportError) in
            #expect(request.headers["Authorization"] == "Bearer t\(index)")
            if index == 1 { throw TransportError(kind: .connection, description: "reset") }
            return FakeTransport.json(FakeTransport.profile(2, "Two", version: 1))
        }
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.retry = RetryPolicy(initialDelay: .milliseconds(1))
        configuration.tokenProvider = {
            asked.withLock { count in
                count += 1
                return "t\(count)"
            }
        }
        let client = ProfileClient(configuration: configuration, transport: transport)
        _ = try await client.fetch(id: 2)
        #expect(asked.withLock { $0 } == 2)
    }
}

/// ``ProfileClient/profiles(ids:)`` over a fake transport: floors from the client's own writes,
/// chunks of 100, order, missing ids, and observers of a member.
@Suite(.timeLimit(.minutes(1))) struct ProfileClientListTests {
    @Test func aListCarriesTheFloorsOfTheClientsWritesAndReachesObservers() async throws {
        let transport = FakeTransport { request, _ throws(TransportError) in
            if request.method == "PATCH" { return FakeTransport.json(FakeTransport.profile(2, "Mine", version: 5)) }
            let body = #"{"profiles":[\#(String(decoding: try! JSONEncoder().encode(FakeTransport.profile(2, "Mine", version: 5)), as: UTF8.self)),\#(String(decoding: try! JSONEncoder().encode(FakeTransport.profile(1, "One", version: 1)), as: UTF8.self))],"missing":[3]}"#
            return TransportResponse(status: 200, headers: ["content-type": "application/json"], body: Data(body.utf8))
        }
        let client = FakeTransport.client(transport)
        _ = try await client.edit(id: 2, ProfileChanges(displayName: "Mine"), expectedVersion: 4)
        let updates = client.updates(for: 1)
        let list = try await client.profiles(ids: [2, 1, 3, 2])
        #expect(list.profiles.map(\.id) == [2, 1])
        #expect(list.missing == [3])
        let query = transport.requests.last?.url.query ?? ""
        #expect(query == "ids=2@5,1,3", "the client's own write is a floor; a repeated id is asked once")
        var iterator = updates.makeAsyncIterator()
        #expect(await iterator.next()?.displayName == "One", "a member reaches the observers of its id")
    }

    @Test func moreThanOneHundredIDsAreAskedInChunksInOrder() async throws {
        let transport = FakeTransport { request, _ throws(TransportError) in
            let ids = (request.url.query ?? "").dropFirst("ids=".count).split(separator: ",").compactMap { Int64($0) }
            let profiles = ids.map { String(decoding: try! JSONEncoder().encode(FakeTransport.profile($0, "P", version: 1)), as: UTF8.self) }
            let body = #"{"profiles":[\#(profiles.joined(separator: ","))],"missing":[]}"#
            return TransportResponse(status: 200, headers: ["content-type": "application/json"], body: Data(body.utf8))
        }
        let client = FakeTransport.client(transport)
        let ids = Array(Int64(1)...Int64(250))
        let list = try await client.profiles(ids: ids)
        #expect(list.profiles.map(\.id) == ids)
        #expect(transport.requests.count == 3)
        #expect(try await client.profiles(ids: []) == ProfileList(profiles: [], missing: []))
        #expect(transport.requests.count == 3, "no request for no ids")
    }

    @Test func aRefusedListIsAnError() async {
        let transport = FakeTransport { _, _ throws(TransportError) in
            FakeTransport.problem(400, kind: "invalid-ids", field: "ids")
        }
        let client = FakeTransport.client(transport)
        await #expect(throws: ProfileClientError.validation(field: "ids", detail: "invalid-ids")) {
            try await client.profiles(ids: [1])
        }
    }
}

/// `updated_at` as a `Date`: the service's text read and written back unchanged.
@Suite struct TimestampTests {
    @Test(arguments: [
        "2026-11-28T20:59:01.402311Z", "2026-01-01T00:00:00Z", "1999-12-31T23:59:59.000001Z", "2024-02-29T12:00:00.5Z",
        "2026-03-01T00:00:00.999999Z",
    ])
    func theServicesTimestampsReadAndWriteBack(_ text: String) throws {
        let date = try #require(Timestamp.parse(text))
        let written = Timestamp.format(date)
        #expect(Timestamp.parse(written) == date)
        if text.hasSuffix(".5Z") {
            #expect(written == "2024-02-29T12:00:00.500000Z")
        } else {
            #expect(written == text)
        }
    }

    @Test func aTimestampIsTheInstantItNames() throws {
        #expect(Timestamp.parse("1970-01-01T00:00:00Z") == Date(timeIntervalSince1970: 0))
        #expect(Timestamp.parse("2026-01-01T00:00:01Z") == Date(timeIntervalSince1970: 1_767_225_601))
        #expect(Timestamp.parse("2026-11-28T20:59:01.402311+00:00") == Timestamp.parse("2026-11-28T20:59:01.402311Z"))
    }

    @Test(arguments: ["2026-11-28 20:59:01Z", "2026-13-01T00:00:00Z", "2026-11-28T20:59:01", "2026-11-28T20:59:01.Z", "x"])
    func anythingElseIsRefused(_ text: String) {
        #expect(Timestamp.parse(text) == nil)
    }

    @Test func aProfileWithABadTimestampDoesNotDecode() {
        let json = #"{"id":1,"username":"ada","display_name":"Ada","version":1,"updated_at":"yesterday"}"#
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Profile.self, from: Data(json.utf8)) }
    }
}
