import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient

/// Edits as an app's user makes them while the live updates run: an edit is shown, pending, only
/// over the version it was made on; a newer confirmed version — the edit's own event arriving
/// before its answer, another device's change — is shown as it is; no version is shown that the
/// service could not have written; a failed edit rolls back without discarding the one queued
/// behind it.
@Suite(.timeLimit(.minutes(1))) struct EditsNeverGoBackTests {
    typealias SlowService = SerializedEditsTests.SlowService
    static let id = SerializedEditsTests.id

    /// Every version observers were shown, in order, with whether it was pending.
    static func versions(_ events: [ProfileEvent]) -> [String] {
        events.compactMap { event in
            switch event {
            case .updated(let profile): "\(profile.displayName) v\(profile.version)"
            case .pending(let profile): "\(profile.displayName) v\(profile.version) pending"
            default: nil
            }
        }
    }

    @Test func theEditsOwnEventBeforeItsAnswerShowsTheWrittenVersionNeverOneAboveItNorBack() async throws {
        let service = SlowService()
        let client = FakeTransport.client(service.transport)
        _ = try await client.fetch(id: Self.id)
        let seen = EventRecorder(client.events(for: Self.id))
        let edit = Task { try await client.edit(id: Self.id, ProfileChanges(displayName: "New")) }
        #expect(await seen.wait { Self.versions($0).last == "New v2 pending" })
        // The service publishes a write's event before it answers the PUT.
        await client.cache.didReceiveEvent(FakeTransport.profile(Self.id, "New", version: 2))
        #expect(await seen.wait { Self.versions($0).last == "New v2" })
        await service.answer(1)
        #expect(try await edit.value.version == 2)
        try await Task.sleep(for: .milliseconds(20))
        #expect(
            Self.versions(seen.events) == ["Start v1", "New v2 pending", "New v2"],
            "never v3 (the event's version + 1), never back to v1 or a pending v2 after the confirmed one")
    }

    @Test func anotherDevicesChangeDuringAnEditIsShownAtOnceAndTheEditDoesNotOverwriteIt() async throws {
        let service = SlowService()
        let client = FakeTransport.client(service.transport)
        _ = try await client.fetch(id: Self.id)
        let seen = EventRecorder(client.events(for: Self.id))
        let edit = Task { try await client.edit(id: Self.id, ProfileChanges(displayName: "Mine")) }
        #expect(await seen.wait { Self.versions($0).last == "Mine v2 pending" })
        // Another device renamed the profile; its event arrives while the edit is in flight.
        let theirs = service.stored.withLock { stored in
            stored = FakeTransport.profile(Self.id, "Theirs", version: 2)
            return stored
        }
        await client.cache.didReceiveEvent(theirs)
        #expect(await seen.wait { Self.versions($0).last == "Theirs v2" }, "shown before the edit's answer")
        // A later edit is made over what the user now sees.
        let next = Task { try await client.edit(id: Self.id, ProfileChanges(displayName: "Mine again")) }
        #expect(await seen.wait { Self.versions($0).last == "Mine again v3 pending" })
        await service.answer(1)
        await #expect(throws: ProfileClientError.conflict(current: theirs)) { try await edit.value }
        await service.answer(2)
        let written = try await next.value
        #expect(written.displayName == "Mine again" && written.version == 3)
        #expect(service.writes.withLock { $0.map(\.version) } == [1, 2], "the second edit expected the version the user saw")
        #expect(!Self.versions(seen.events).contains("Mine v2"), "a version the service never wrote: \(seen.events)")
    }

    @Test func aFailedEditRollsBackAndTheEditQueuedBehindItIsStillSent() async throws {
        let gate = Gate()
        let stored = Mutex(FakeTransport.profile(Self.id, "Start", version: 1))
        let transport = FakeTransport { request, index throws(TransportError) in
            guard request.method == "PATCH" else { return FakeTransport.json(stored.withLock { $0 }) }
            if index == 2 {  // the first edit (after the fetch): held, then refused by a restarting instance
                await gate.wait()
                return FakeTransport.problem(503, kind: "database-unavailable")
            }
            let body = try! JSONSerialization.jsonObject(with: request.body!) as! [String: Any]
            return stored.withLock { stored in
                stored = FakeTransport.profile(Self.id, body["display_name"] as! String, version: stored.version + 1)
                return FakeTransport.json(stored)
            }
        }
        let client = FakeTransport.client(transport)
        _ = try await client.fetch(id: Self.id)
        let seen = EventRecorder(client.events(for: Self.id))
        let failing = Task { try await client.edit(id: Self.id, ProfileChanges(displayName: "A")) }
        #expect(await seen.wait { Self.versions($0).last == "A v2 pending" })
        // Made while A is shown pending: over the version A will write.
        let queued = Task { try await client.edit(id: Self.id, ProfileChanges(displayName: "B")) }
        #expect(await seen.wait { Self.versions($0).last == "B v3 pending" })
        gate.open()
        await #expect(throws: ProfileClientError.unavailable(retryAfter: nil)) { try await failing.value }
        let written = try await queued.value
        #expect(written.displayName == "B" && written.version == 2, "the queued edit was sent over the version it was made on")
        #expect(await seen.wait { Self.versions($0).last == "B v2" })
        #expect(
            Self.versions(seen.events) == ["Start v1", "A v2 pending", "B v3 pending", "B v2 pending", "B v2"],
            "A rolled back, B stayed shown over the version it is sent on")
    }

    @Test func aListMarksTheMemberAnEditOfThisClientHasNotConfirmed() async throws {
        let service = SlowService()
        let client = FakeTransport.client(service.transport)
        _ = try await client.fetch(id: Self.id)
        let lists = StreamRecorder(client.observeList(ids: [Self.id]))
        #expect(await lists.wait { $0.last?.pending.isEmpty == true })
        let edit = Task { try await client.edit(id: Self.id, ProfileChanges(displayName: "Pending")) }
        #expect(await lists.wait { $0.last?.pending == [Self.id] && $0.last?.profiles.first?.displayName == "Pending" })
        await service.answer(1)
        _ = try await edit.value
        #expect(await lists.wait { $0.last?.pending.isEmpty == true && $0.last?.profiles.first?.version == 2 })
    }
}
