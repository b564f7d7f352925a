import Foundation
import Observation
import Synchronization
import Testing

@testable import ProfileClient

/// ``ObservableProfiles``: what a SwiftUI view reads synchronously, redrawn through Observation,
/// and bounded by the ids nobody follows.
@MainActor
@Suite(.timeLimit(.minutes(1))) struct ObservableProfilesTests {
    typealias Events = ControlledEventTransport

    nonisolated static func profile(_ id: Int64, _ name: String, _ version: Int32) -> Profile {
        FakeTransport.profile(id, name, version: version)
    }

    /// A client whose reads answer version 1 of any id, and whose streams the test drives.
    static func client(_ events: Events) -> ProfileClient {
        let transport = FakeTransport { request, _ throws(TransportError) in
            guard let id = Int64(request.url.lastPathComponent) else {
                return TransportResponse(status: 404, headers: [:], body: Data())
            }
            return FakeTransport.json(profile(id, "One", 1))
        }
        return RecordedSleeps().client(transport, events: events)
    }

    /// Waits (up to 5 s) until `done` holds, letting the main actor run meanwhile.
    static func wait(until done: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(5)
        while !done() {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return true
    }

    @Test func aViewReadsTheProfileSynchronouslyAndIsToldWhenItChanges() async throws {
        let events = Events()
        let profiles = ObservableProfiles(client: Self.client(events))
        #expect(profiles.profile(7) == nil)
        let following = Task { await profiles.follow(7) }
        #expect(await events.waitForConnections(1))
        #expect(events.requests[0].url.path == "/users/profiles/events", "a list's stream, not one per profile")
        // The stream's first event is the current profile: no read per row.
        events.send(.read([Events.profile(Self.profile(7, "One", 1))]))
        #expect(await Self.wait { profiles.profile(7) == Self.profile(7, "One", 1) })

        let changed = Flag()
        withObservationTracking { _ = profiles.profile(7) } onChange: { changed.set() }
        events.send(.read([Events.profile(Self.profile(7, "Two", 2))]))
        #expect(await Self.wait { changed.isSet }, "a view that read profile(7) is redrawn")
        #expect(profiles.profile(7) == Self.profile(7, "Two", 2))

        events.send(.read([Events.deleted(7)]))
        #expect(await Self.wait { profiles.entry(7)?.isDeleted == true })
        #expect(profiles.profile(7) == nil)
        following.cancel()
    }

    @Test func aScreenOf500RowsScrolledKeepsItsStreamAndReadsNoRowAlone() async throws {
        let events = Events()
        let http = FakeTransport { _, _ throws(TransportError) in TransportResponse(status: 500) }
        let profiles = ObservableProfiles(client: RecordedSleeps().client(http, events: events))
        var rows: [Int64: Task<Void, Never>] = [:]
        for id in Int64(1)...500 { rows[id] = Task { await profiles.follow(id) } }
        #expect(await Self.wait { events.requests.last.map { $0.streamIDs.count == 500 } ?? false })
        events.send(.read((Int64(1)...500).map { Events.profile(Self.profile($0, "Row", 1)) }))
        #expect(await Self.wait { (Int64(1)...500).allSatisfy { profiles.profile($0) != nil } })
        // Scroll: 100 rows leave, 100 come. The stream of the 400 that stay is not touched.
        for id in Int64(1)...100 { rows.removeValue(forKey: id)?.cancel() }
        for id in Int64(501)...600 { rows[id] = Task { await profiles.follow(id) } }
        #expect(await events.waitForConnections(2))
        #expect(events.requests[1].streamIDs == Set(501...600), "a stream for the rows that came, and only them")
        try await Task.sleep(for: .milliseconds(50))
        #expect(events.requests.count == 2 && events.openNow == 2, "the first stream stays open: \(events.requests.count)")
        #expect(events.requests.allSatisfy { $0.url.path == "/users/profiles/events" })
        let reads = http.requests.map(\.url.path)
        #expect(reads.allSatisfy { $0 == "/users/profiles" }, "no read per row: \(reads)")
        #expect(reads.count <= 2 * 6, "one list read (and its retry) per 100 rows that appeared: \(reads.count)")
        for row in rows.values { row.cancel() }
    }

    @Test func pausingTheClientClosesTheRowsStreamAndResumingReopensItAtTheirFloors() async throws {
        let events = Events()
        let client = Self.client(events)
        let profiles = ObservableProfiles(client: client)
        let row = Task { await profiles.follow(5) }
        #expect(await events.waitForConnections(1))
        events.send(.read([Events.profile(Self.profile(5, "A", 3))]))
        #expect(await Self.wait { profiles.profile(5)?.version == 3 })
        client.pauseLiveUpdates()  // the app left the foreground
        #expect(await Self.wait { events.openNow == 0 }, "no socket open in the background")
        client.resumeLiveUpdates()
        #expect(await events.waitForConnections(2))
        #expect(events.requests[1].streamMembers == ["5@3"], "resumed at the floor: nothing committed meanwhile is missed")
        row.cancel()
    }

    @Test func idsNobodyFollowsAreForgottenLeastRecentlyUsedFirst() async throws {
        let events = Events()
        let profiles = ObservableProfiles(client: Self.client(events), capacity: 2)
        for id in Int64(1)...4 {
            let following = Task { await profiles.follow(id) }
            #expect(await Self.wait { events.requests.last.map { $0.streamIDs == [id] } ?? false })
            events.send(.read([Events.profile(Self.profile(id, "One", 1))]))
            #expect(await Self.wait { profiles.profile(id) != nil })
            following.cancel()
            await following.value
        }
        #expect(profiles.profile(1) == nil && profiles.profile(2) == nil, "the least recently used are gone")
        #expect(profiles.profile(3) != nil && profiles.profile(4) != nil)
    }

    @Test func aViewThatGoesAwayWhileItsProfileLoadsRecordsNoFailure() async throws {
        let asked = Flag()
        let transport = FakeTransport { _, _ throws(TransportError) in
            asked.set()
            try? await Task.sleep(for: .seconds(30))  // a slow network; the view goes first
            throw TransportError(kind: .cancelled, description: "cancelled")
        }
        // Without live updates, a followed id is read.
        let client = RecordedSleeps().client(transport, events: Events()) { $0.followsLiveUpdates = false }
        let profiles = ObservableProfiles(client: client)
        let following = Task { await profiles.follow(8) }
        #expect(await Self.wait { asked.isSet })
        following.cancel()  // SwiftUI ends the view's .task
        await following.value
        try await Task.sleep(for: .milliseconds(50))
        #expect(profiles.entry(8)?.failure == nil, "a cancellation is not a failure: \(String(describing: profiles.entry(8)))")
    }

    @Test func aStreamThatFailsIsShownOnEveryRowAndClearedWhenItIsBack() async throws {
        let events = Events(scripts: [[.failBecause(.offline)]])
        let profiles = ObservableProfiles(client: Self.client(events))
        let rows = [Task { await profiles.follow(1) }, Task { await profiles.follow(2) }]
        #expect(await Self.wait { profiles.entry(1)?.failure == .offline && profiles.entry(2)?.failure == .offline })
        #expect(await events.waitForConnections(2), "it reconnects by itself")
        events.send(.read([Events.profile(Self.profile(1, "A", 1)), Events.profile(Self.profile(2, "B", 1))]))
        #expect(await Self.wait { profiles.entry(1)?.failure == nil && profiles.profile(2) != nil })
        for row in rows { row.cancel() }
    }

    @Test func aChangeToOneProfileDoesNotRedrawAViewOfAnother() async throws {
        let profiles = ObservableProfiles(client: Self.client(Events()))
        profiles.apply(.updated(Self.profile(1, "A", 1)), to: 1)
        profiles.apply(.updated(Self.profile(2, "B", 1)), to: 2)
        let viewOfA = Counter()
        withObservationTracking { _ = profiles.profile(1) } onChange: { viewOfA.increment() }
        for version in Int32(2)...6 {
            profiles.apply(.updated(Self.profile(2, "B", version)), to: 2)
        }
        #expect(viewOfA.value == 0, "five changes to B redrew the view of A \(viewOfA.value) times")
        profiles.apply(.updated(Self.profile(1, "A", 2)), to: 1)
        #expect(viewOfA.value == 1, "a change to A redraws it")
        // A view of an id nothing is known of yet hears of its first value.
        let viewOfNew = Counter()
        withObservationTracking { _ = profiles.profile(3) } onChange: { viewOfNew.increment() }
        profiles.apply(.updated(Self.profile(3, "C", 1)), to: 3)
        #expect(viewOfNew.value == 1)
    }
}

/// How many times an observation fired.
final class Counter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
