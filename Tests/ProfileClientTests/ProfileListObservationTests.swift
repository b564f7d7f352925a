import Foundation
import Synchronization
import Testing

@testable import ProfileClient

/// ``ProfileClient/observeList(ids:)`` over a driven multi-id stream: bursts, order of versions,
/// deletions, resume points, the store shared with single-profile observers.
@Suite(.timeLimit(.minutes(1))) struct ProfileListObservationTests {
    typealias Events = ControlledEventTransport

    static func p(_ id: Int64, _ name: String, _ version: Int32) -> Profile {
        FakeTransport.profile(id, name, version: version)
    }

    /// A client whose list streams are `events`; `updates(for:)` opens no stream of its own, so
    /// every connection `events` records is a list's.
    static func client(
        _ events: Events,
        http: FakeTransport = FakeTransport { _, _ throws(TransportError) in
            throw TransportError(kind: .other, description: "no HTTP in this test")
        }
    ) -> ProfileClient {
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.followsLiveUpdates = false
        configuration.tokenProvider = { "token" }
        configuration.retry = RetryPolicy(maximumAttempts: 1)
        return ProfileClient(configuration: configuration, transport: http, eventTransport: events, randomUnit: { 0 })
    }

    static func list(_ profiles: [Profile], missing: [Int64] = []) -> ProfileList {
        ProfileList(profiles: profiles, missing: missing)
    }

    @Test func aChangeOfOneMemberCostsWhatChangedNotTheList() async throws {
        let observers = ProfileListObservers()
        let (stream, continuation) = AsyncThrowingStream<ProfileList, any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let ids = Array(Int64(1)...5_000)
        let token = observers.register(ids: ids, continuation: continuation)
        observers.update(
            Dictionary(uniqueKeysWithValues: ids.map { ($0, ListMember.profile(FakeTransport.profile($0, "A", version: 1), isPending: false)) }))
        for version in Int32(2)...101 {
            observers.update([7: .profile(FakeTransport.profile(7, "B", version: version), isPending: version % 2 == 0)])
        }
        #expect(observers.rebuilds[token] == 1, "built once when complete; 100 changes of a member in place")
        observers.update([9: .missing])  // a member moves to `missing`: built anew
        var iterator = stream.makeAsyncIterator()
        let last = try #require(try await iterator.next())
        #expect(last.profiles.count == 4_999 && last.missing == [9])
        #expect(last.profiles.map(\.id) == ids.filter { $0 != 9 }, "in the order asked")
        #expect(last.profiles.first { $0.id == 7 }?.version == 101 && last.pending.isEmpty)
        #expect(observers.rebuilds[token] == 2)
        observers.update([7: .profile(FakeTransport.profile(7, "C", version: 102), isPending: true)])
        let pending = try #require(try await iterator.next())
        #expect(pending.pending == [7] && pending.profiles[6].displayName == "C", "in place after a rebuild too")
    }

    @Test func aBurstOfEventsBecomesOneValue() async throws {
        let events = Events(scripts: [[.read([Events.profile(Self.p(1, "A", 1)), Events.profile(Self.p(2, "B", 1)), Events.deleted(3)])]])
        let client = Self.client(events)
        let reader = ListReader(client.observeList(ids: [1, 2, 3]))
        #expect(await reader.wait { $0.count >= 1 })
        #expect(reader.seen == [Self.list([Self.p(1, "A", 1), Self.p(2, "B", 1)], missing: [3])])

        // The consumer waits for the next value while the burst is applied: were each event a
        // value, it would get the first at once and the last later.
        events.send(.read([
            Events.profile(Self.p(1, "A2", 2)), Events.profile(Self.p(2, "B2", 2)), Events.profile(Self.p(3, "C", 4)),
            Events.profile(Self.p(1, "A3", 3)),
        ]))
        let whole = Self.list([Self.p(1, "A3", 3), Self.p(2, "B2", 2), Self.p(3, "C", 4)])
        #expect(await reader.wait { $0.last == whole })
        #expect(reader.seen.count == 2, "one value for the burst: \(reader.seen)")
    }

    @Test func theStoreGivesAListOneValuePerStep() async throws {
        let lists = ProfileListObservers()
        let cache = LocalProfileCache(window: .seconds(10), capacity: 1_000, observers: ProfileObservers(), lists: lists, now: { .now })
        let (stream, continuation) = AsyncThrowingStream<ProfileList, any Error>.makeStream()  // keeps every value
        _ = lists.register(ids: [1, 2], continuation: continuation)
        await cache.didReceiveEvents([
            .profile(Self.p(1, "A", 1)), .profile(Self.p(2, "B", 1)), .profile(Self.p(1, "A", 2)), .deleted(id: 2),
            .profile(Self.p(2, "B", 3)),
        ])
        await cache.didReceiveEvents([.profile(Self.p(1, "A", 1))])  // older: no change
        await cache.didReceiveEvents([.profile(Self.p(2, "B", 3))])  // the same: no change
        continuation.finish()
        var values: [ProfileList] = []
        for try await value in stream { values.append(value) }
        #expect(values == [Self.list([Self.p(1, "A", 2), Self.p(2, "B", 3)])])
    }

    @Test func aListNeverGoesBackAndShowsTheClientsOwnWriteAtOnce() async throws {
        let written = Self.p(1, "Mine", 5)
        let http = FakeTransport { _, _ throws(TransportError) in FakeTransport.json(written) }
        let events = Events(scripts: [[.read([Events.profile(Self.p(1, "Four", 4)), Events.profile(Self.p(2, "B", 1))])]])
        let client = Self.client(events, http: http)
        let reader = ListReader(client.observeList(ids: [1, 2]))
        #expect(await reader.wait { $0.count >= 1 })

        _ = try await client.edit(id: 1, ProfileChanges(displayName: "Mine"), expectedVersion: 4)
        #expect(await reader.wait { $0.last == Self.list([written, Self.p(2, "B", 1)]) })
        #expect(reader.seen.contains { $0.profiles.first?.displayName == "Mine" && $0.profiles.first != written },
            "the optimistic profile came first")

        events.send(.read([Events.profile(Self.p(1, "Four", 4))]))  // older than the write: not shown
        events.send(.read([Events.profile(Self.p(1, "Six", 6))]))
        #expect(await reader.wait { $0.last?.profiles.first?.version == 6 })
        let versions = reader.seen.compactMap { $0.profiles.first?.version }
        #expect(versions == versions.sorted(), "profile 1 went back: \(versions)")
    }

    @Test func aDeletedMemberIsMissingUntilItIsCreatedAgain() async throws {
        let stale = Self.p(2, "B", 1)
        let http = FakeTransport { _, _ throws(TransportError) in FakeTransport.json(stale) }  // a late read
        let events = Events(scripts: [[.read([Events.profile(Self.p(1, "A", 1)), Events.profile(stale)])]])
        let client = Self.client(events, http: http)
        let reader = ListReader(client.observeList(ids: [1, 2]))
        #expect(await reader.wait { $0.count >= 1 })

        events.send(.read([Events.deleted(2)]))
        #expect(await reader.wait { $0.last == Self.list([Self.p(1, "A", 1)], missing: [2]) })
        // A read answered before the deletion and received after it does not bring it back.
        #expect(try await client.fetch(id: 2, policy: .reloadFromServer) == stale)
        let detail = client.updates(for: 2)  // starts with nothing: the profile is gone

        let again = Self.p(2, "B again", 2)
        events.send(.read([Events.profile(again)]))
        #expect(await reader.wait { $0.last == Self.list([Self.p(1, "A", 1), again]) })
        #expect(!reader.seen.dropFirst(2).contains { $0.profiles.contains(stale) }, "\(reader.seen)")
        var iterator = detail.makeAsyncIterator()
        #expect(await iterator.next() == again)
    }

    @Test func aReconnectResumesAtTheFloorsTheStoreHolds() async throws {
        let http = FakeTransport { _, _ throws(TransportError) in FakeTransport.json(Self.p(3, "Mine", 7)) }
        let events = Events(scripts: [[
            .read([Events.profile(Self.p(1, "A", 4)), Events.profile(Self.p(2, "B", 2))]),
            .read([Events.deleted(2)]),
            .close,
        ]])
        let client = Self.client(events, http: http)
        _ = try await client.edit(id: 3, ProfileChanges(displayName: "Mine"), expectedVersion: 6)  // this client's write
        let list = client.observeList(ids: [1, 2, 3, 4])
        #expect(await events.waitForConnections(2))
        let requests = events.requests
        #expect(requests[0].url.path == "/users/profiles/events")
        #expect(requests[0].url.query == "ids=1,2,3@7,4")
        #expect(requests[1].url.query == "ids=1@4,2@2,3@7,4", "each id at the highest version held; 4 is unknown")
        for request in requests {
            #expect(request.headers["Last-Event-ID"] == nil, "the endpoint resumes by floors only")
            #expect(request.headers["Accept"] == "text/event-stream")
            #expect(request.headers["Authorization"] == "Bearer token")
        }
        _ = list
    }

    @Test func aListTheStoreKnowsIsShownBeforeTheStreamSaysAnything() async throws {
        let known = Self.p(1, "Known", 3)
        let http = FakeTransport { _, _ throws(TransportError) in FakeTransport.json(known) }
        let events = Events()
        let client = Self.client(events, http: http)
        _ = try await client.fetch(id: 1)
        let reader = ListReader(client.observeList(ids: [1]))
        #expect(await reader.wait { $0 == [Self.list([known])] })
        #expect(await events.waitForConnections(1))
        #expect(events.requests.first?.url.query == "ids=1@3")
    }

    @Test func anEventOnTheListsStreamReachesTheObserversOfItsID() async throws {
        let events = Events(scripts: [[.read([Events.profile(Self.p(1, "A", 1)), Events.profile(Self.p(2, "B", 1))])]])
        let client = Self.client(events)
        let detail = client.updates(for: 2)
        let reader = ListReader(client.observeList(ids: [1, 2]))
        #expect(await reader.wait { $0.count >= 1 })
        events.send(.read([Events.profile(Self.p(2, "B2", 2))]))
        let seen = await ProfileClientLiveUpdatesTests.collect(detail, count: 2)
        #expect(seen.map(\.version) == [1, 2])
        #expect(await reader.wait { $0.last?.profiles.last?.version == 2 })
    }

    @Test func aRefusalForGoodEndsTheListWithItsError() async throws {
        let events = Events(scripts: [
            [.refuse(FakeTransport.problem(503, kind: "too-many-subscribers", headers: ["retry-after": "0"]))],
            [.refuse(FakeTransport.problem(401, kind: "unauthorized"))],
            [.refuse(FakeTransport.problem(401, kind: "unauthorized"))],
        ])
        let client = Self.client(events)
        let reader = ListReader(client.observeList(ids: [1]))
        #expect(await reader.wait { _ in reader.ended })
        #expect(reader.error as? ProfileClientError == .unauthorized)
        #expect(events.requests.count == 3, "503 is retried, 401 once with a fresh token")
    }

    @Test func longListsAreSplitIntoStreamsThatFitTheServicesBounds() async throws {
        let small = Array(Int64(1)...2_500)
        let chunks = ProfileClient.streamChunks(small)
        #expect(Array(chunks.joined()) == small)
        for chunk in chunks {
            #expect(chunk.count <= ProfileClient.maximumIDsPerStream)
            let longest = chunk.map { "\($0)@2147483647" }.joined(separator: ",")
            #expect(longest.utf8.count <= ProfileClient.maximumStreamQueryBytes)
        }
        #expect(ProfileClient.streamChunks([]).isEmpty)

        let events = Events()
        let client = Self.client(events)
        let list = client.observeList(ids: small + [1])  // a repeated id is followed once
        #expect(await events.waitForConnections(chunks.count))
        try await Task.sleep(for: .milliseconds(50))
        let asked = events.requests.map { $0.url.query!.dropFirst("ids=".count).split(separator: ",").map { Int64($0)! } }
        #expect(asked.count == chunks.count)
        #expect(Set(asked.joined()) == Set(small))
        #expect(asked.joined().count == small.count)
        _ = list
    }

    @Test func aListEndsWhenTheClientIsReleased() async throws {
        let events = Events()
        var client: ProfileClient? = Self.client(events)
        let reader = ListReader(client!.observeList(ids: [1, 2]))
        #expect(await events.waitForConnections(1))
        weak let released = client
        client = nil
        #expect(released == nil, "following a list does not retain the client")
        #expect(await reader.wait { _ in reader.ended })
        #expect(reader.error == nil)
    }

    @Test func aListOpenedOfflineSaysSoAtOnceAndSaysItIsLiveAgainWhenTheStreamReopens() async throws {
        let events = Events(scripts: [[.failBecause(.offline)]])
        let client = Self.client(events)
        let reader = ListReader(client.observeList(ids: [1, 2]))
        #expect(
            await reader.wait { $0.last == ProfileList(profiles: [], missing: [], unknown: [1, 2], streamFailure: .offline) },
            "nothing known and offline: said at once, not silence: \(reader.seen)")
        #expect(await events.waitForConnections(2), "it reconnects by itself")
        events.send(.read([Events.profile(Self.p(1, "A", 1)), Events.deleted(2)]))
        #expect(await reader.wait { $0.last == Self.list([Self.p(1, "A", 1)], missing: [2]) }, "live again: \(reader.seen)")
        // Losing a live stream is said too, with what the list holds.
        events.send(.fail)
        #expect(await reader.wait { $0.last?.streamFailure == .transport("connection lost") && $0.last?.profiles.count == 1 })
    }

    @Test func anEventThatDoesNotDecodeIsReportedNamingTheMemberAndTheNextVersionStillArrives() async throws {
        let broken = ServerSentEvent(event: "profile", id: "2", data: #"{"id":1,"username":"u","display_name":"A","version":"2","updated_at":"x"}"#)
        let events = Events(scripts: [[.read([Events.profile(Self.p(1, "A", 1))])]])
        let client = Self.client(events)
        let reader = ListReader(client.observeList(ids: [1]))
        #expect(await reader.wait { $0.last == Self.list([Self.p(1, "A", 1)]) })
        events.send(.read([broken]))
        #expect(await reader.wait { $0.last?.streamFailure.map { if case .decoding(field: "version", _) = $0 { true } else { false } } == true })
        events.send(.read([Events.profile(Self.p(1, "A", 3))]))
        #expect(await reader.wait { $0.last == Self.list([Self.p(1, "A", 3)]) }, "whole again: \(reader.seen)")
    }
}

/// Reads a list stream in a task of its own and keeps every value it got.
final class ListReader: Sendable {
    private final class Seen: Sendable {
        let state = Mutex<(values: [ProfileList], ended: Bool, error: (any Error)?)>(([], false, nil))
    }

    private let seenSoFar = Seen()
    private let task: Task<Void, Never>

    init(_ stream: AsyncThrowingStream<ProfileList, any Error>) {
        let seen = seenSoFar
        task = Task {
            do {
                for try await list in stream { seen.state.withLock { $0.values.append(list) } }
                seen.state.withLock { $0.ended = true }
            } catch {
                seen.state.withLock { $0 = ($0.values, true, error) }
            }
        }
    }

    deinit { task.cancel() }

    var seen: [ProfileList] { seenSoFar.state.withLock { $0.values } }
    var ended: Bool { seenSoFar.state.withLock { $0.ended } }
    var error: (any Error)? { seenSoFar.state.withLock { $0.error } }

    /// Waits (up to 5 s) until `done` holds for the values seen; false if it never did.
    func wait(until done: ([ProfileList]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(5)
        while !done(seen) {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return true
    }
}
