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
        #expect(await Self.wait { profiles.profile(7) == Self.profile(7, "One", 1) })

        let changed = Flag()
        withObservationTracking { _ = profiles.profile(7) } onChange: { changed.set() }
        #expect(await events.waitForConnections(1))
        events.send(.read([Events.profile(Self.profile(7, "Two", 2))]))
        #expect(await Self.wait { changed.isSet }, "a view that read profile(7) is redrawn")
        #expect(profiles.profile(7) == Self.profile(7, "Two", 2))

        events.send(.close)  // the service ends a deleted profile's stream, and then answers 404
        #expect(await events.waitForConnections(2))
        events.send(.refuse(FakeTransport.problem(404, kind: "profile-not-found")))
        #expect(await Self.wait { profiles.entry(7)?.isDeleted == true })
        #expect(profiles.profile(7) == nil)
        following.cancel()
    }

    @Test func idsNobodyFollowsAreForgottenLeastRecentlyUsedFirst() async throws {
        let profiles = ObservableProfiles(client: Self.client(Events()), capacity: 2)
        for id in Int64(1)...4 {
            let following = Task { await profiles.follow(id) }
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
        let profiles = ObservableProfiles(client: RecordedSleeps().client(transport, events: Events()))
        let following = Task { await profiles.follow(8) }
        #expect(await Self.wait { asked.isSet })
        following.cancel()  // SwiftUI ends the view's .task
        await following.value
        try await Task.sleep(for: .milliseconds(50))
        #expect(profiles.entry(8)?.failure == nil, "a cancellation is not a failure: \(String(describing: profiles.entry(8)))")
    }

    @Test func aChangeToOneProfileDoesNotRedrawAViewOfAnother() async throws {
        let events = Events()
        let profiles = ObservableProfiles(client: Self.client(events))
        let a = Task { await profiles.follow(1) }
        let b = Task { await profiles.follow(2) }
        #expect(await Self.wait { profiles.profile(1) != nil && profiles.profile(2) != nil })
        #expect(await events.waitForConnections(2))
        let viewOfA = Counter()
        func track() { withObservationTracking { _ = profiles.profile(1) } onChange: { viewOfA.increment() } }
        track()
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
        a.cancel()
        b.cancel()
    }
}

/// How many times an observation fired.
final class Counter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
