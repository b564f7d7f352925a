import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient

/// ``ProfileClient/clear()`` on logout: afterwards nothing of the previous user is in memory, on
/// disk or handed to an observer — not the profiles, not the pending edits, not the answers of
/// requests that were in flight when it ran.
@Suite(.timeLimit(.minutes(1))) struct LogoutTests {
    typealias SlowService = SerializedEditsTests.SlowService
    static let id = SerializedEditsTests.id

    static func client(_ transport: FakeTransport, file: URL? = nil) -> ProfileClient {
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.persistenceFile = file
        configuration.persistenceInterval = .seconds(3_600)  // written by saveStore() alone
        configuration.retry = RetryPolicy(maximumAttempts: 1)
        return ProfileClient(configuration: configuration, transport: transport, eventTransport: nil)
    }

    @Test func aNewObserverAfterClearIsHandedNothingOfThePreviousUser() async throws {
        let answer = Mutex(FakeTransport.profile(Self.id, "Before", version: 1))
        let client = Self.client(FakeTransport { _, _ throws(TransportError) in FakeTransport.json(answer.withLock { $0 }) })
        _ = try await client.fetch(id: Self.id)
        await client.clear()

        let seen = EventRecorder(client.events(for: Self.id))
        let after = answer.withLock { answer in
            answer = FakeTransport.profile(Self.id, "After", version: 2)
            return answer
        }
        _ = try await client.fetch(id: Self.id)
        #expect(await seen.wait { $0.contains(.updated(after)) })
        #expect(seen.events == [.updated(after)], "the previous user's profile is not handed on: \(seen.events)")
    }

    @Test func anEditInFlightAtClearIsNeitherShownNorStoredNorWritten() async throws {
        let file = PersistentStoreTests.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let service = SlowService()
        let client = Self.client(service.transport, file: file)
        _ = try await client.fetch(id: Self.id)
        let before = EventRecorder(client.events(for: Self.id))
        let edit = Task { try await client.edit(id: Self.id, ProfileChanges(displayName: "Private")) }
        #expect(await before.wait { EditsNeverGoBackTests.versions($0).last == "Private v2 pending" })

        await client.clear()
        #expect(!FileManager.default.fileExists(atPath: file.path))
        let after = EventRecorder(client.events(for: Self.id))
        await service.answer(1)
        _ = try? await edit.value
        try await client.saveStore()

        #expect(await client.cache.confirmedProfile(id: Self.id) == nil, "the answer is not put back into the store")
        #expect(await client.cache.floor(id: Self.id) == nil)
        #expect(!FileManager.default.fileExists(atPath: file.path), "nor written to disk")
        // Something of the new session, so that the observer surely had its chance to be handed more.
        await client.cache.didFetch(FakeTransport.profile(Self.id, "Next user's view", version: 9))
        #expect(await after.wait { !$0.isEmpty })
        #expect(
            after.events == [.updated(FakeTransport.profile(Self.id, "Next user's view", version: 9))],
            "neither the pending edit nor its answer: \(after.events)")
    }

    @Test func aReadInFlightAtClearDoesNotBringThePreviousUserBack() async throws {
        let gate = Gate()
        let transport = FakeTransport { _, _ throws(TransportError) in
            await gate.wait()
            return FakeTransport.json(FakeTransport.profile(Self.id, "Before", version: 1))
        }
        let client = Self.client(transport)
        let read = Task { try await client.fetch(id: Self.id) }
        while transport.requests.isEmpty { try await Task.sleep(for: .milliseconds(1)) }
        await client.clear()
        gate.open()
        _ = try? await read.value
        #expect(await client.cache.confirmedProfile(id: Self.id) == nil)
        let seen = EventRecorder(client.events(for: Self.id))
        await client.cache.didFetch(FakeTransport.profile(Self.id, "After", version: 2))
        #expect(await seen.wait { !$0.isEmpty })
        #expect(seen.events == [.updated(FakeTransport.profile(Self.id, "After", version: 2))])
    }

    @Test func aReadAfterClearDoesNotShareOneMadeBefore() async throws {
        let gate = Gate()
        let transport = FakeTransport { _, index throws(TransportError) in
            if index == 1 { await gate.wait() }  // the previous user's read, held
            return FakeTransport.json(FakeTransport.profile(Self.id, index == 1 ? "Before" : "After", version: 1))
        }
        let client = Self.client(transport)
        let before = Task { try await client.fetch(id: Self.id) }
        while transport.requests.isEmpty { try await Task.sleep(for: .milliseconds(1)) }
        await client.clear()
        let after = Task { try await client.fetch(id: Self.id) }
        let sentAnew = await Eventually.waitAsync(timeout: .seconds(5)) { transport.requests.count == 2 }
        gate.open()
        #expect(sentAnew, "the read in flight is the previous session's: not shared")
        _ = try? await before.value
        #expect(try await after.value.displayName == "After")
    }

    @MainActor
    @Test func aNewObservableProfilesAfterClearStartsEmpty() async throws {
        let events = ControlledEventTransport()
        let client = ObservableProfilesTests.client(events)
        _ = try await client.fetch(id: 7)
        await client.clear()
        let profiles = ObservableProfiles(client: client)
        let following = Task { await profiles.follow(7) }
        defer { following.cancel() }
        #expect(await events.waitForConnections(1))
        #expect(profiles.entry(7) == nil, "the previous user's profile is not shown: \(String(describing: profiles.entry(7)))")
    }

    @MainActor
    @Test func anObservableProfilesOfThePreviousSessionIsEmptiedByClear() async throws {
        let events = ControlledEventTransport()
        let client = ObservableProfilesTests.client(events)
        let profiles = ObservableProfiles(client: client)
        let following = Task { await profiles.follow(7) }
        defer { following.cancel() }
        #expect(await events.waitForConnections(1))
        events.send(.read([ControlledEventTransport.profile(FakeTransport.profile(7, "One", version: 1))]))
        #expect(await ObservableProfilesTests.wait { profiles.profile(7) != nil })
        await client.clear()
        #expect(profiles.entry(7) == nil, "emptied when clear() returns")
    }
}
