import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient

/// ``ProfileClient/edit(id:_:expectedVersion:)``: a user typing a name on a slow network. Edits of one id
/// go one at a time, the ones made meanwhile collapse into the newest, none conflicts with the
/// client's own earlier write, the screen shows the newest intent at once, and a failure rolls
/// back and is reported.
@Suite(.timeLimit(.minutes(1))) struct SerializedEditsTests {
    static let id: Int64 = 5

    /// A service that holds each edit (a `PATCH` of the display name) until the test opens its
    /// gate, and applies it if the version in its `If-Match` is current (409 otherwise), as the
    /// real one does.
    final class SlowService: Sendable {
        let gates = Mutex<[Gate]>([])
        let stored = Mutex(FakeTransport.profile(SerializedEditsTests.id, "Start", version: 1))
        let writes = Mutex<[(name: String, version: Int32)]>([])

        var transport: FakeTransport {
            FakeTransport { [self] request, _ throws(TransportError) in await self.handle(request) }
        }

        private func handle(_ request: TransportRequest) async -> TransportResponse {
            guard request.method == "PATCH" else { return FakeTransport.json(stored.withLock { $0 }) }
            let body = try! JSONSerialization.jsonObject(with: request.body!) as! [String: Any]
            let tag = request.headers["If-Match"]!
            let (name, version) = (body["display_name"] as! String, Int32(tag.dropFirst().dropLast())!)
            writes.withLock { $0.append((name, version)) }
            let gate = Gate()
            gates.withLock { $0.append(gate) }
            await gate.wait()
            return stored.withLock { stored in
                guard stored.version == version else {
                    return FakeTransport.problem(409, kind: "version-conflict", current: stored)
                }
                stored = FakeTransport.profile(SerializedEditsTests.id, name, version: version + 1)
                return FakeTransport.json(stored)
            }
        }


        /// Waits until `count` PUTs arrived, then answers the last one.
        func answer(_ count: Int) async {
            while gates.withLock({ $0.count }) < count { try? await Task.sleep(for: .milliseconds(1)) }
            gates.withLock { $0[count - 1] }.open()
        }
    }

    @Test func rapidEditsAreSerializedCoalescedAndTheLastWins() async throws {
        let service = SlowService()
        let client = FakeTransport.client(service.transport)
        _ = try await client.fetch(id: Self.id)
        let seen = EventRecorder(client.events(for: Self.id))
        var edits: [Task<Profile, any Error>] = []
        for name in ["A", "Ad", "Ada", "Ada L"] {
            edits.append(Task { try await client.edit(id: Self.id, ProfileChanges(displayName: name)) })
            #expect(await seen.wait { $0.last.map { event in event.displayName == name } ?? false }, "shown at once: \(name)")
        }
        await service.answer(1)
        await service.answer(2)
        var answers: [Profile] = []
        for edit in edits { answers.append(try await edit.value) }
        #expect(service.writes.withLock { $0.map(\.name) } == ["A", "Ada L"], "the edits made meanwhile collapse into the newest")
        #expect(service.writes.withLock { $0.map(\.version) } == [1, 2], "the second expects the version the first wrote")
        #expect(answers.map(\.displayName) == ["A", "Ada L", "Ada L", "Ada L"])
        #expect(service.stored.withLock { $0.displayName } == "Ada L")
        #expect(await seen.wait { $0.last == .updated(FakeTransport.profile(Self.id, "Ada L", version: 3)) })
    }

    @Test func aFailureRollsBackToTheNewestConfirmedAndIsReportedToEveryEditWaiting() async throws {
        let service = SlowService()
        let client = FakeTransport.client(service.transport)
        _ = try await client.fetch(id: Self.id)
        let seen = EventRecorder(client.events(for: Self.id))
        let first = Task { try await client.edit(id: Self.id, ProfileChanges(displayName: "Mine")) }
        #expect(await seen.wait { $0.last?.displayName == "Mine" })
        let second = Task { try await client.edit(id: Self.id, ProfileChanges(displayName: "Mine too")) }
        #expect(await seen.wait { $0.last?.displayName == "Mine too" })
        // Another device wrote meanwhile: the first edit meets a real conflict.
        let theirs = service.stored.withLock { stored in
            stored = FakeTransport.profile(Self.id, "Theirs", version: 2)
            return stored
        }
        await service.answer(1)
        await #expect(throws: ProfileClientError.conflict(current: theirs)) { try await first.value }
        await #expect(throws: ProfileClientError.conflict(current: theirs)) { try await second.value }
        #expect(await seen.wait { $0.last == .updated(theirs) }, "\(seen.events)")
        #expect(service.writes.withLock { $0.count } == 1)
    }
}

extension ProfileEvent {
    /// The display name of an `updated` or `pending` event.
    var displayName: String? {
        switch self {
        case .updated(let profile), .pending(let profile): profile.displayName
        default: nil
        }
    }
}
