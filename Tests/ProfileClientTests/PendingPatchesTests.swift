import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient

/// Every edit is shown at once, pending, and never goes back: edits without a version (shown over
/// a newer confirmed version that leaves what they set as the user saw it, as the service will
/// take them over it), and edits of an id the client never read (shown as soon as a version of it
/// is known).
@Suite(.timeLimit(.minutes(1))) struct PendingPatchesTests {
    static let id: Int64 = 11
    static let versions = EditsNeverGoBackTests.versions

    /// A service that holds each write until the test opens its gate and applies it to what it
    /// holds then; reads answer at once.
    final class HeldWrites: Sendable {
        let stored = Mutex(FakeTransport.profile(PendingPatchesTests.id, "Start", version: 1))
        let gates = Mutex<[Gate]>([])

        var transport: FakeTransport {
            FakeTransport { [self] request, _ throws(TransportError) in
                guard request.method != "GET" else { return FakeTransport.json(stored.withLock { $0 }) }
                let gate = Gate()
                gates.withLock { $0.append(gate) }
                await gate.wait()
                let body = try! JSONSerialization.jsonObject(with: request.body!) as! [String: Any]
                return FakeTransport.json(
                    stored.withLock { stored in
                        for (name, value) in body where name != "version" {
                            if name == "display_name" {
                                stored.displayName = value as! String
                            } else {
                                stored.fields[name] = value as? String
                            }
                        }
                        stored.version += 1
                        stored.updatedAt = FakeTransport.profile(stored.id, "", version: stored.version).updatedAt
                        return stored
                    })
            }
        }

        /// Waits until `count` writes arrived, then answers the last one.
        func answer(_ count: Int) async {
            while gates.withLock({ $0.count }) < count { try? await Task.sleep(for: .milliseconds(1)) }
            gates.withLock { $0[count - 1] }.open()
        }
    }

    /// A profile as the service writes it, or with `pendingOver`, as the client shows it pending
    /// over that version (its time stamp is the base's until the service answers).
    static func profile(_ name: String, _ fields: [String: String] = [:], version: Int32, pendingOver base: Int32? = nil)
        -> Profile
    {
        var profile = FakeTransport.profile(id, name, version: version)
        profile.fields = fields
        if let base { profile.updatedAt = FakeTransport.profile(id, name, version: base).updatedAt }
        return profile
    }

    /// A client of a ``HeldWrites`` service that read the profile (unless not `reading`), and what
    /// its observers see.
    static func started(reading: Bool = true) async throws -> (HeldWrites, ProfileClient, EventRecorder) {
        let service = HeldWrites()
        let client = FakeTransport.client(service.transport)
        if reading { _ = try await client.fetch(id: id) }
        return (service, client, EventRecorder(client.events(for: id)))
    }

    @Test func fieldsSetWithoutAVersionAreShownAtOnceAndNeverGoBack() async throws {
        let (service, client, seen) = try await Self.started()
        let edit = Task { try await client.edit(id: Self.id, ProfileChanges(fields: ["bio": "Hi"])) }
        let pending = Self.profile("Start", ["bio": "Hi"], version: 2, pendingOver: 1)
        #expect(await seen.wait { $0.last == .pending(pending) }, "shown before the answer: \(seen.events)")
        await service.answer(1)
        let written = try await edit.value
        #expect(written.fields["bio"] == "Hi")
        #expect(await seen.wait { $0.last == .updated(written) })
        #expect(seen.events == [.updated(Self.profile("Start", version: 1)), .pending(pending), .updated(written)])
    }

    @Test func anEditWithoutAVersionStaysShownOverAnotherDevicesChangeOfOtherMembers() async throws {
        let (service, client, seen) = try await Self.started()
        let edit = Task { try await client.edit(id: Self.id, ProfileChanges(displayName: "Mine")) }
        #expect(await seen.wait { Self.versions($0).last == "Mine v2 pending" })
        // Another device set a field meanwhile; the patch will land over it, not conflict.
        let theirs = service.stored.withLock { stored in
            stored = Self.profile("Start", ["location": "Oslo"], version: 2)
            return stored
        }
        await client.cache.didReceiveEvent(theirs)
        #expect(
            await seen.wait { $0.last == .pending(Self.profile("Mine", ["location": "Oslo"], version: 3, pendingOver: 2)) },
            "their change shown, with the patch still over it: \(seen.events)")
        await service.answer(1)
        let written = try await edit.value
        #expect(written == Self.profile("Mine", ["location": "Oslo"], version: 3))
        #expect(await seen.wait { $0.last == .updated(written) })
        #expect(
            !Self.versions(seen.events).contains("Start v2"), "never back to a name without the patch: \(seen.events)")
    }

    @Test func anEditWhoseOwnEventArrivesFirstIsShownAsWrittenNeverAboveIt() async throws {
        let (service, client, seen) = try await Self.started()
        let edit = Task { try await client.edit(id: Self.id, ProfileChanges(fields: ["bio": "Hi"])) }
        #expect(await seen.wait { $0.last == .pending(Self.profile("Start", ["bio": "Hi"], version: 2, pendingOver: 1)) })
        // The service publishes the patch's event before it answers.
        await client.cache.didReceiveEvent(Self.profile("Start", ["bio": "Hi"], version: 2))
        #expect(await seen.wait { $0.last == .updated(Self.profile("Start", ["bio": "Hi"], version: 2)) })
        await service.answer(1)
        _ = try await edit.value
        #expect(
            seen.events == [
                .updated(Self.profile("Start", version: 1)), .pending(Self.profile("Start", ["bio": "Hi"], version: 2, pendingOver: 1)),
                .updated(Self.profile("Start", ["bio": "Hi"], version: 2)),
            ], "never v3, a version the service did not write")
    }

    @Test func anEditOfAnIdNeverReadIsShownOnceItsVersionIsRead() async throws {
        let (service, client, seen) = try await Self.started(reading: false)
        let edit = Task { try await client.edit(id: Self.id, ProfileChanges(displayName: "New")) }
        // The client reads the version first, then sends the edit over it: shown pending then.
        #expect(
            await seen.wait { $0.last == .pending(Self.profile("New", version: 2, pendingOver: 1)) }, "before the answer: \(seen.events)")
        await service.answer(1)
        #expect(try await edit.value == Self.profile("New", version: 2))
        #expect(Self.versions(seen.events) == ["New v2 pending", "New v2"], "the version read comes with the edit over it")
    }

    @Test func aFieldsEditOfAnIdNeverReadIsShownOnceAVersionIsKnown() async throws {
        let (service, client, seen) = try await Self.started(reading: false)
        let edit = Task { try await client.edit(id: Self.id, ProfileChanges(fields: ["bio": "Hi"])) }
        while service.gates.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(1)) }
        _ = try await client.fetch(id: Self.id, policy: .reloadFromServer)
        #expect(await seen.wait { $0.last == .pending(Self.profile("Start", ["bio": "Hi"], version: 2, pendingOver: 1)) }, "\(seen.events)")
        await service.answer(1)
        _ = try await edit.value
        #expect(Self.versions(seen.events) == ["Start v2 pending", "Start v2"], "the version read comes with the patch over it")
    }

    @Test func anEditQueuedBehindAnotherKeepsBothShownUntilEachIsAnswered() async throws {
        let (service, client, seen) = try await Self.started()
        let bio = Task { try await client.edit(id: Self.id, ProfileChanges(fields: ["bio": "Hi"])) }
        #expect(await seen.wait { Self.versions($0).last == "Start v2 pending" })
        let location = Task { try await client.edit(id: Self.id, ProfileChanges(fields: ["location": "Oslo"])) }
        #expect(await seen.wait { Self.versions($0).last == "Start v3 pending" })
        await service.answer(1)
        #expect(try await bio.value.fields == ["bio": "Hi"])
        await service.answer(2)
        #expect(try await location.value.fields == ["bio": "Hi", "location": "Oslo"])
        let shown = seen.events.compactMap { event -> Profile? in
            switch event {
            case .updated(let profile), .pending(let profile): profile
            default: nil
            }
        }
        #expect(
            shown.dropFirst().allSatisfy { $0.fields["bio"] == "Hi" }, "the bio never disappears while in flight: \(seen.events)")
        #expect(
            shown.dropFirst(2).allSatisfy { $0.fields["location"] == "Oslo" }, "nor the location: \(seen.events)")
    }
}
