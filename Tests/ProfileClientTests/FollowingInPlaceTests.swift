import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient

/// ``StreamLayout``: which streams open and close as ids are followed and let go of.
@Suite struct StreamLayoutTests {
    static func chunk(_ ids: [Int64]) -> [[Int64]] { ProfileClient.streamChunks(ids) }

    static func follow(_ ids: ClosedRange<Int64>, in layout: inout StreamLayout) {
        for id in ids { layout.follow(id) }
    }

    static func letGo(_ ids: ClosedRange<Int64>, in layout: inout StreamLayout) {
        for id in ids { layout.letGo(id) }
    }

    @Test func idsThatAppearTogetherShareAStreamAndStreamsThatKeepTheirIdsAreNotTouched() {
        var layout = StreamLayout()
        Self.follow(1...100, in: &layout)
        let first = layout.settle(chunk: Self.chunk)
        #expect(first.closed.isEmpty && first.opened.map(\.ids) == [Array(1...100)])
        // 40 rows leave and 40 come: the first stream keeps 60 of its 100 and stays.
        Self.letGo(1...40, in: &layout)
        Self.follow(101...140, in: &layout)
        let second = layout.settle(chunk: Self.chunk)
        #expect(second.closed.isEmpty, "a stream with most of its ids is kept")
        #expect(second.opened.map(\.ids) == [Array(101...140)])
        #expect(layout.settle(chunk: Self.chunk).isEmpty, "nothing changed, nothing to do")
    }

    @Test func aStreamWithMoreThanHalfItsIdsGoneJoinsTheNextOneAndAStreamWithNoneCloses() {
        var layout = StreamLayout()
        Self.follow(1...100, in: &layout)
        let first = layout.settle(chunk: Self.chunk).opened[0].key
        Self.letGo(1...60, in: &layout)
        #expect(layout.settle(chunk: Self.chunk).isEmpty, "no new ids: the stream serves the 40 left as it is")
        Self.follow(101...110, in: &layout)
        let folded = layout.settle(chunk: Self.chunk)
        #expect(folded.closed == [first])
        #expect(folded.opened.count == 1 && Set(folded.opened[0].ids) == Set(61...110), "the 40 left and the 10 new")
        Self.letGo(61...110, in: &layout)
        let emptied = layout.settle(chunk: Self.chunk)
        #expect(emptied.closed == [folded.opened[0].key] && emptied.opened.isEmpty)
        #expect(layout.streams.isEmpty)
    }

    @Test func pastFourStreamsTheSmallestAreFoldedIntoTheNewOne() {
        var layout = StreamLayout()
        Self.follow(1...100, in: &layout)
        _ = layout.settle(chunk: Self.chunk)
        for start in stride(from: Int64(101), through: 103, by: 1) {  // three rows, each alone
            layout.follow(start)
            _ = layout.settle(chunk: Self.chunk)
        }
        #expect(layout.streams.count == 4)
        layout.follow(104)
        let changes = layout.settle(chunk: Self.chunk)
        #expect(changes.closed.count == 1, "one small stream folded, the large one untouched")
        #expect(changes.opened.count == 1 && changes.opened[0].ids.count == 2)
        #expect(layout.streams.count == 4)
        #expect(layout.streams.values.contains { $0.ids == Array(1...100) })
    }

    @Test func anIdLetGoAndFollowedAgainBeforeTheMomentSettlesKeepsItsStream() {
        var layout = StreamLayout()
        Self.follow(1...3, in: &layout)
        _ = layout.settle(chunk: Self.chunk)
        layout.letGo(2)
        layout.follow(2)  // a row recycled in place
        #expect(layout.settle(chunk: Self.chunk).isEmpty)
    }

    @Test func theIdsOfAStreamRefusedForGoodWaitUntilFollowedAgain() {
        var layout = StreamLayout()
        Self.follow(1...3, in: &layout)
        let key = layout.settle(chunk: Self.chunk).opened[0].key
        layout.streamEnded(key)
        #expect(layout.settle(chunk: Self.chunk).isEmpty, "no retry loop against a refusal")
        layout.follow(2)
        #expect(layout.settle(chunk: Self.chunk).opened.map(\.ids) == [[2]], "a new observer follows anew")
    }
}

/// Following changes in place against the client's transports: scrolling opens a stream per
/// moment for the rows that came and never reconnects one whose rows stayed, rows that appear
/// are filled by one list read, and new streams keep the backoff of the others.
@MainActor
@Suite(.timeLimit(.minutes(1))) struct FollowingInPlaceTests {
    typealias Events = ControlledEventTransport

    /// Answers list reads (`/users/profiles?ids=`) with version 1 of every id asked.
    static func listService() -> FakeTransport {
        FakeTransport { request, _ throws(TransportError) in
            let ids = request.streamMembers.compactMap { Int64($0.split(separator: "@")[0]) }
            let profiles = ids.map { FakeTransport.profile($0, "Row \($0)", version: 1) }
            let encoded = String(decoding: try! JSONEncoder().encode(profiles), as: UTF8.self)
            return TransportResponse(
                status: 200, headers: ["content-type": "application/json"],
                body: Data(#"{"profiles":\#(encoded),"missing":[]}"#.utf8))
        }
    }

    @Test func scrolling5000IdsOpensOneStreamPerMomentAndFillsItsRowsWithOneListRead() async throws {
        let events = Events()  // streams that stay open and silent: a proxy that buffers them
        let http = Self.listService()
        // The test ends each moment (a scroll) once its rows came and went, not a timer.
        let client = RecordedSleeps().client(http, events: events, settleDelay: nil)
        let streams = try #require(client.followedStreams)
        let profiles = ObservableProfiles(client: client)
        let window: Int64 = 100
        let step: Int64 = 50
        var rows: [Int64: Task<Void, Never>] = [:]
        for id in 1...window { rows[id] = Task { await profiles.follow(id) } }
        #expect(await ObservableProfilesTests.wait { streams.followedIDs == Set(1...window) })
        await streams.settleNow()
        #expect(await events.waitForConnections(1))
        #expect(await ObservableProfilesTests.wait { (1...window).allSatisfy { profiles.profile($0) != nil } })
        #expect(http.requests.count == 1, "one list read for the first screen")
        var followedBefore = Set(1...window)
        var moments = 1
        for first in stride(from: Int64(1), to: 5_000 - window + 1, by: Int(step)) {
            let came = (first + window)...(first + window + step - 1)
            for id in first..<(first + step) { rows.removeValue(forKey: id)?.cancel() }
            for id in came { rows[id] = Task { await profiles.follow(id) } }
            let shown = Set((first + step)...came.upperBound)
            #expect(await ObservableProfilesTests.wait { streams.followedIDs == shown })
            let reads = http.requests.count
            await streams.settleNow()
            moments += 1
            #expect(await events.waitForConnections(moments), "moment \(moments)")
            let opened = events.requests[moments - 1].streamIDs
            #expect(opened == Set(came), "a stream for the rows that came, and only them: moment \(moments)")
            #expect(opened.isDisjoint(with: followedBefore), "no stream reconnected for rows that stayed")
            #expect(
                await ObservableProfilesTests.wait { came.allSatisfy { profiles.profile($0) != nil } },
                "the rows that came show their profiles with no event from their stream")
            #expect(http.requests.count == reads + 1, "one list read for the rows that came together")
            followedBefore = shown
        }
        #expect(events.requests.count == moments, "\(events.requests.count) streams for \(moments) moments")
        #expect(events.mostOpen <= 2, "the streams of the window's two halves: \(events.mostOpen)")
        #expect(http.requests.allSatisfy { $0.url.path == "/users/profiles" })
        for row in rows.values { row.cancel() }
    }

    /// Prints the main actor's time for one change of a row and for closing a screen of 2,000
    /// rows (a benchmark's figures, not a timed assertion); asserts the costs that make them linear.
    @Test func theMainActorsTimeForAChangeAndForClosingAScreenOf2000Rows() async throws {
        let events = Events()
        let http = Self.listService()
        let client = RecordedSleeps().client(http, events: events, settleDelay: nil)
        let streams = try #require(client.followedStreams)
        let profiles = ObservableProfiles(client: client, capacity: 200)
        let ids = Array(Int64(1)...2_000)
        let rows = ids.map { id in Task { await profiles.follow(id) } }
        #expect(await ObservableProfilesTests.wait { streams.followedIDs.count == ids.count })
        await streams.settleNow()
        #expect(await ObservableProfilesTests.wait { ids.allSatisfy { profiles.profile($0) != nil } })
        #expect(http.requests.count == 20, "2,000 rows filled by 20 list reads")
        #expect(events.requests.count == 2, "two streams of 1,000")

        let changes = 20_000
        let changing = ContinuousClock.now
        for index in 0..<changes {
            let id = ids[index % ids.count]
            profiles.apply(.updated(FakeTransport.profile(id, "Changed", version: Int32(2 + index / ids.count))), to: id)
        }
        let perChange = (ContinuousClock.now - changing) / changes

        let closing = ContinuousClock.now
        for row in rows { row.cancel() }
        for row in rows { await row.value }
        let closed = ContinuousClock.now - closing
        print("main actor: \(perChange) per change of a row; \(closed) to close a screen of \(ids.count) rows")
        #expect(streams.followedIDs.isEmpty)
        // Each pass sorts at most 220 idle ids, once per 20 rows gone: closing n rows costs O(n).
        #expect(profiles.evictionPasses <= ids.count / 20 + 1, "eviction sorted \(profiles.evictionPasses) times")
        #expect(profiles.profile(1) == nil && profiles.profile(2_000) != nil, "the 200 most recent are kept")
        await streams.settleNow()
        #expect(await ObservableProfilesTests.wait { events.openNow == 0 }, "every stream closed")
    }

    @Test func idsObservedOneByOneShareOneStream() async throws {
        let events = Events()
        let client = RecordedSleeps().client(Self.listService(), events: events)
        var observers: [Any] = []
        for id in Int64(1)...50 { observers.append(EventRecorder(client.events(for: id))) }
        for id in Int64(51)...100 { observers.append(client.updates(for: id)) }
        #expect(await events.waitForConnections(1))
        try await Task.sleep(for: .milliseconds(100))
        #expect(events.requests.count == 1, "100 ids followed with events(for:) and updates(for:): one stream")
        #expect(events.requests[0].streamIDs == Set(1...100))
        // A screen showing some of them shares the same stream.
        let profiles = ObservableProfiles(client: client)
        let row = Task { await profiles.follow(7) }
        try await Task.sleep(for: .milliseconds(100))
        #expect(events.requests.count == 1, "an id already followed opens nothing")
        row.cancel()
        _ = observers
    }
}

/// New streams start where the others stand: rows scrolled in during an outage, or after a
/// `Retry-After`, do not connect at once. These tests sleep for real: a minute of backoff that
/// must not be cut short.
@MainActor
@Suite(.timeLimit(.minutes(1))) struct SharedBackoffTests {
    typealias Events = ControlledEventTransport

    static func client(_ events: Events) -> ProfileClient {
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.retry = RetryPolicy(maximumAttempts: 1)
        configuration.liveUpdates.initialDelay = .seconds(60)
        configuration.liveUpdates.maximumDelay = .seconds(60)
        let offline = FakeTransport { _, _ throws(TransportError) in throw TransportError(kind: .offline, description: "offline") }
        return ProfileClient(
            configuration: configuration, transport: offline, eventTransport: events, randomUnit: { 1 },
            sleep: { try await Task.sleep(for: $0) })
    }

    /// No new connection for `duration`.
    static func noNewConnection(_ events: Events, beyond count: Int, for duration: Duration = .milliseconds(300)) async -> Bool {
        try? await Task.sleep(for: duration)
        return events.requests.count == count
    }

    @Test func rowsScrolledInDuringAnOutageWaitTheBackoffAndWakeWhenTheNetworkReturns() async throws {
        let events = Events(scripts: [[.failBecause(.offline)], [.failBecause(.offline)]])
        let client = Self.client(events)
        let profiles = ObservableProfiles(client: client)
        let first = (Int64(1)...10).map { id in Task { await profiles.follow(id) } }
        #expect(await events.waitForConnections(1))
        #expect(await Self.noNewConnection(events, beyond: 1), "the first stream sleeps its backoff")
        let scrolled = (Int64(11)...20).map { id in Task { await profiles.follow(id) } }
        #expect(await Self.noNewConnection(events, beyond: 1), "the rows scrolled in wait like the rest")
        client.networkDidReturn()
        #expect(await events.waitForConnections(3), "both reconnect at once when the network is back")
        #expect(events.requests.dropFirst().map(\.streamIDs).contains(Set(11...20)))
        for row in first + scrolled { row.cancel() }
    }

    @Test func rowsScrolledInAfterA429WaitItsRetryAfter() async throws {
        let refusal = FakeTransport.problem(429, kind: "too-many-streams", headers: ["retry-after": "60"])
        let events = Events(scripts: [[.refuse(refusal)]])
        let client = Self.client(events)
        let profiles = ObservableProfiles(client: client)
        let first = (Int64(1)...10).map { id in Task { await profiles.follow(id) } }
        #expect(await events.waitForConnections(1))
        let scrolled = (Int64(11)...20).map { id in Task { await profiles.follow(id) } }
        client.networkDidReturn()  // not the network's failure: the service's wait holds
        #expect(await Self.noNewConnection(events, beyond: 1), "Retry-After: 60 holds for the new stream too")
        for row in first + scrolled { row.cancel() }
    }
}
