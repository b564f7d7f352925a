import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient

/// What observers and callers get never goes back to an older version: an optimistic value is
/// shown only while it is newer than the confirmed one, reads return the newer of the store and
/// the answer, and every version learned raises the floor of later reads.
@Suite(.timeLimit(.minutes(1))) struct ScreenOrderTests {
    static let id: Int64 = 9

    static func profile(_ name: String, _ version: Int32) -> Profile {
        FakeTransport.profile(id, name, version: version)
    }

    /// True when no profile in `seen` has a lower version than one before it.
    static func neverWentBack(_ seen: [Profile]) -> Bool {
        zip(seen, seen.dropFirst()).allSatisfy { $0.version <= $1.version }
    }

    @Test func anOptimisticValueOlderThanAConfirmedEventIsNeverShown() async throws {
        let answer = Gate()
        let transport = FakeTransport { _, _ throws(TransportError) in
            await answer.wait()
            return FakeTransport.problem(409, kind: "version-conflict", current: Self.profile("Five", 5))
        }
        let client = FakeTransport.client(transport)
        let seen = StreamRecorder(client.updates(for: Self.id))
        await client.cache.didReceiveEvent(Self.profile("Five", 5))
        let update = Task { try await client.edit(id: Self.id, ProfileChanges(displayName: "X"), expectedVersion: 3) }
        try await Task.sleep(for: .milliseconds(50))  // the intent is registered and would be shown by now
        answer.open()
        await #expect(throws: ProfileClientError.self) { try await update.value }
        #expect(await seen.wait { $0.count >= 1 })
        #expect(!seen.elements.contains { $0.displayName == "X" }, "{v4, X} is older than v5: \(seen.elements)")
        #expect(Self.neverWentBack(seen.elements), "\(seen.elements)")
    }

    @Test func anIntentDoesNotHideNewerEventsWhileItsRequestIsInFlight() async throws {
        let answer = Gate()
        let transport = FakeTransport { request, _ throws(TransportError) in
            if request.method == "GET" { return FakeTransport.json(Self.profile("One", 1)) }
            await answer.wait()
            return FakeTransport.problem(409, kind: "version-conflict", current: Self.profile("Three", 3))
        }
        let client = FakeTransport.client(transport)
        _ = try await client.fetch(id: Self.id)
        let seen = StreamRecorder(client.updates(for: Self.id))
        let update = Task { try await client.edit(id: Self.id, ProfileChanges(displayName: "Mine"), expectedVersion: 1) }
        #expect(await seen.wait { $0.last == Self.profile("One", 1).renamed("Mine", 2) })
        await client.cache.didReceiveEvent(Self.profile("Two", 2))
        await client.cache.didReceiveEvent(Self.profile("Three", 3))
        #expect(
            await seen.wait { $0.last == Self.profile("Three", 3) },
            "events v2 and v3 show while the edit is in flight: \(seen.elements)")
        answer.open()
        _ = try? await update.value
        #expect(Self.neverWentBack(seen.elements), "\(seen.elements)")
    }

    @Test func aFetchThatLeftBeforeAWriteReturnsTheWritesNewerVersion() async throws {
        let slowRead = Gate()
        let transport = FakeTransport { request, _ throws(TransportError) in
            if request.method == "PATCH" { return FakeTransport.json(Self.profile("Written", 5)) }
            await slowRead.wait()
            return FakeTransport.json(Self.profile("Old", 4))
        }
        let client = FakeTransport.client(transport)
        let read = Task { try await client.fetch(id: Self.id, policy: .reloadFromServer) }
        try await Task.sleep(for: .milliseconds(50))  // the read has left
        let written = try await client.edit(id: Self.id, ProfileChanges(displayName: "Written"), expectedVersion: 4)
        slowRead.open()
        #expect(try await read.value == written, "the newer of the store's v5 and the answer's v4")
    }

    @Test func aListReturnsTheNewerOfTheStoreAndTheAnswer() async throws {
        let transport = FakeTransport { request, _ throws(TransportError) in
            if request.method == "PATCH" { return FakeTransport.json(Self.profile("Written", 5)) }
            let old = String(decoding: try! JSONEncoder().encode(Self.profile("Old", 4)), as: UTF8.self)
            return TransportResponse(status: 200, headers: [:], body: Data(#"{"profiles":[\#(old)],"missing":[]}"#.utf8))
        }
        let client = FakeTransport.client(transport)
        let written = try await client.edit(id: Self.id, ProfileChanges(displayName: "Written"), expectedVersion: 4)
        #expect(try await client.profiles(ids: [Self.id]).profiles == [written])
    }

    @Test func everyVersionTheClientLearnsRaisesTheFloorOfTheNextRead() async throws {
        let transport = FakeTransport { request, index throws(TransportError) in
            switch index {
            case 1: return FakeTransport.json(Self.profile("Fetched", 3))
            case 2: return FakeTransport.problem(409, kind: "version-conflict", current: Self.profile("Theirs", 7))
            default: return FakeTransport.json(Self.profile("Theirs", 7))
            }
        }
        let client = FakeTransport.client(transport)
        _ = try await client.fetch(id: Self.id)
        _ = try? await client.edit(id: Self.id, ProfileChanges(displayName: "Mine"), expectedVersion: 3)
        _ = try await client.fetch(id: Self.id, policy: .reloadFromServer)
        #expect(transport.requests[2].url.query == "min_version=7", "the 409's current version is the floor")
        await client.cache.didReceiveEvent(Self.profile("Event", 8))
        _ = try await client.fetch(id: Self.id, policy: .reloadFromServer)
        #expect(transport.requests[3].url.query == "min_version=8", "an event's version is the floor")
    }

    @Test func aReadRevalidatesWhatTheStoreHoldsWithIfNoneMatch() async throws {
        let transport = FakeTransport { _, index throws(TransportError) in
            index == 1 ? FakeTransport.json(Self.profile("Held", 3)) : TransportResponse(status: 304, headers: [:], body: Data())
        }
        let client = FakeTransport.client(transport)
        _ = try await client.fetch(id: Self.id)
        #expect(transport.requests[0].headers["If-None-Match"] == nil)
        #expect(try await client.fetch(id: Self.id, policy: .reloadFromServer) == Self.profile("Held", 3))
        #expect(transport.requests[1].headers["If-None-Match"] == #""3""#)
    }
}

extension Profile {
    /// This profile with another display name and version (an optimistic one).
    func renamed(_ displayName: String, _ version: Int32) -> Profile {
        var profile = self
        profile.displayName = displayName
        profile.version = version
        return profile
    }
}
