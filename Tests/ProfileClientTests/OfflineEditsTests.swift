import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient

/// Edits made offline: kept (in the store's file too), shown pending, sent in order and once when
/// the network is back — across a restart of the app — with a conflict surfaced, never lost nor
/// silently overwritten; and what every entry says of where its profile came from.
@Suite(.timeLimit(.minutes(1))) struct OfflineEditsTests {
    /// A service that keeps profiles and applies edits (`PATCH` with `If-Match`, 409 with the
    /// current profile when stale), and a network the test switches off: then every request fails
    /// without an answer.
    final class FlakyService: Sendable {
        let profiles: Mutex<[Int64: Profile]>
        let isOnline = Mutex(true)
        /// The edits that reached the service: id, display name, the version in `If-Match`, status.
        let edits = Mutex<[(id: Int64, name: String?, version: Int32, status: Int)]>([])
        /// The display names the service refuses (422).
        let refused = Mutex<Set<String>>([])
        /// When set, the next edit is applied and its answer lost (the connection drops).
        let losesNextAnswer = Mutex(false)

        init(_ profiles: [Profile]) {
            self.profiles = Mutex(Dictionary(uniqueKeysWithValues: profiles.map { ($0.id, $0) }))
        }

        var transport: FakeTransport {
            FakeTransport { [self] request, _ throws(TransportError) in try self.handle(request) }
        }

        var editCount: Int { edits.withLock { $0.count } }

        /// Another device's change, committed at once.
        func change(_ id: Int64, _ body: (inout Profile) -> Void) -> Profile {
            profiles.withLock { profiles in
                body(&profiles[id]!)
                profiles[id]!.version += 1
                profiles[id]!.updatedAt = FakeTransport.profile(id, "", version: profiles[id]!.version).updatedAt
                return profiles[id]!
            }
        }

        private func handle(_ request: TransportRequest) throws(TransportError) -> TransportResponse {
            guard isOnline.withLock({ $0 }) else { throw TransportError(kind: .offline, description: "offline") }
            let id = Int64(request.url.lastPathComponent)!
            guard request.method == "PATCH" else {
                return profiles.withLock { $0[id] }.map { FakeTransport.json($0) } ?? FakeTransport.problem(404, kind: "not-found")
            }
            let body = try! JSONSerialization.jsonObject(with: request.body!) as! [String: Any]
            let name = body["display_name"] as? String
            let version = Int32(request.headers["If-Match"]!.dropFirst().dropLast())!
            let response: TransportResponse = profiles.withLock { profiles in
                let current = profiles[id]!
                if let name, refused.withLock({ $0.contains(name) }) {
                    return FakeTransport.problem(422, kind: "invalid-field", field: "display_name")
                }
                guard current.version == version else { return FakeTransport.problem(409, kind: "version-conflict", current: current) }
                var written = current
                for (member, value) in body {
                    if member == "display_name" { written.displayName = value as! String } else { written.fields[member] = value as? String }
                }
                written.version += 1
                written.updatedAt = FakeTransport.profile(id, "", version: written.version).updatedAt
                profiles[id] = written
                return FakeTransport.json(written)
            }
            edits.withLock { $0.append((id, name, version, response.status)) }
            if losesNextAnswer.withLock({ lose in defer { lose = false }; return lose }) {
                throw TransportError(kind: .connection, description: "the connection dropped")
            }
            return response
        }
    }

    static func profile(_ id: Int64, _ name: String, version: Int32) -> Profile {
        FakeTransport.profile(id, name, version: version)
    }

    /// `profile(id, name, version:)` as shown pending over `base` (its time stamp is the base's).
    static func pending(_ id: Int64, _ name: String, version: Int32, over base: Int32) -> Profile {
        var profile = FakeTransport.profile(id, name, version: version)
        profile.updatedAt = FakeTransport.profile(id, name, version: base).updatedAt
        return profile
    }

    static func client(_ service: FlakyService, file: URL? = nil) -> ProfileClient {
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.persistenceFile = file
        configuration.persistenceInterval = .seconds(3_600)  // written by saveStore() alone
        configuration.retry = RetryPolicy(maximumAttempts: 1)
        return ProfileClient(configuration: configuration, transport: service.transport, eventTransport: nil)
    }

    /// Quits the app: the edit's caller goes away (cancelled: the edit stays queued), the store is
    /// written, and the client is released, so it sends nothing more.
    static func quit(_ client: inout ProfileClient?, waiting callers: [Task<Profile, any Error>]) async throws {
        try await client!.saveStore()
        for caller in callers {
            caller.cancel()
            await #expect(throws: ProfileClientError.cancelled) { try await caller.value }
        }
        weak let released = client
        client = nil
        #expect(await Eventually.waitAsync(timeout: .seconds(5)) { released == nil }, "the client was released")
    }

    /// Makes `client`, persisting to `file` if any, read profile 1 (version 1) from a service that then
    /// loses the network; returns the service. (The test holds the only reference, to quit it.)
    static func readThenOffline(file: URL? = nil, client: inout ProfileClient?) async throws -> FlakyService {
        let service = FlakyService([Self.profile(1, "Start", version: 1)])
        client = Self.client(service, file: file)
        _ = try await client!.fetch(id: 1)
        service.isOnline.withLock { $0 = false }
        return service
    }

    @Test func anEditMadeOfflineSurvivesARestartAndIsSentOnceWhenTheNetworkIsBack() async throws {
        let file = PersistentStoreTests.file()
        defer { try? FileManager.default.removeItem(at: file) }
        var first: ProfileClient?
        let service = try await Self.readThenOffline(file: file, client: &first)
        let before = EventRecorder(first!.events(for: 1))
        let edit = Task { [first] in try await first!.edit(id: 1, ProfileChanges(displayName: "Offline")) }
        let pending = ProfileEvent.pending(Self.pending(1, "Offline", version: 2, over: 1))
        #expect(await before.wait { $0.last == pending })
        #expect(await first!.hasPendingEdits)
        try await Task.sleep(for: .milliseconds(50))  // its first attempt found no network
        #expect(await before.wait { $0.last == pending }, "not rolled back: \(before.events)")
        #expect(await first!.entry(id: 1)?.hasPendingEdits == true)
        try await Self.quit(&first, waiting: [edit])
        #expect(before.events == [.updated(Self.profile(1, "Start", version: 1)), pending])

        // The next launch, still offline: the edit is shown pending from the file.
        let second = Self.client(service, file: file)
        let outcomes = StreamRecorder(second.editOutcomes())
        let seen = EventRecorder(second.events(for: 1))
        #expect(await seen.wait { $0.first == pending }, "\(seen.events)")
        #expect(await second.entry(id: 1)?.isPending == true)
        #expect(service.editCount == 0)

        service.isOnline.withLock { $0 = true }
        second.networkDidReturn()
        let written = Self.profile(1, "Offline", version: 2)
        #expect(await outcomes.wait { !$0.isEmpty })
        #expect(outcomes.elements == [ProfileEditOutcome(id: 1, changes: ProfileChanges(displayName: "Offline"), result: .success(written))])
        #expect(await seen.wait { $0.last == .updated(written) })
        #expect(seen.events == [pending, .updated(written)], "shown pending until confirmed")
        #expect(service.edits.withLock { $0.map(\.version) } == [1], "sent once, over the version the user saw")
        #expect(await second.hasPendingEdits == false)
        try await second.saveStore()
        #expect(ProfileStoreFile(url: file).loadStore(maximumBytes: 1 << 20).edits.isEmpty, "and gone from the file")
    }

    @Test func aChangeMadeOnAnotherDeviceMeanwhileIsAConflictAfterTheRestart() async throws {
        let file = PersistentStoreTests.file()
        defer { try? FileManager.default.removeItem(at: file) }
        var first: ProfileClient?
        let service = try await Self.readThenOffline(file: file, client: &first)
        let edit = Task { [first] in try await first!.edit(id: 1, ProfileChanges(displayName: "Mine")) }
        #expect(await Eventually.waitAsync { await first!.entry(id: 1)?.isPending == true })
        try await Self.quit(&first, waiting: [edit])
        let theirs = service.change(1) { $0.displayName = "Theirs" }  // another device, meanwhile

        let second = Self.client(service, file: file)
        let outcomes = StreamRecorder(second.editOutcomes())
        let seen = EventRecorder(second.events(for: 1))
        service.isOnline.withLock { $0 = true }
        second.networkDidReturn()
        #expect(await outcomes.wait { !$0.isEmpty })
        #expect(outcomes.elements.map(\.result) == [.failure(.conflict(current: theirs))], "surfaced, not lost")
        #expect(await seen.wait { $0.last == .updated(theirs) }, "their change is shown, not overwritten: \(seen.events)")
        #expect(service.profiles.withLock { $0[1] } == theirs)
        #expect(service.editCount == 1)
    }

    @Test func theCallerStillWaitingGetsTheConflict() async throws {
        var held: ProfileClient?
        let service = try await Self.readThenOffline(client: &held)
        let client = held!
        let edit = Task { try await client.edit(id: 1, ProfileChanges(displayName: "Mine")) }
        #expect(await Eventually.waitAsync { await client.entry(id: 1)?.isPending == true })
        let theirs = service.change(1) { $0.displayName = "Theirs" }
        service.isOnline.withLock { $0 = true }
        client.networkDidReturn()
        await #expect(throws: ProfileClientError.conflict(current: theirs)) { try await edit.value }
    }

    @Test func aChangeOfOtherMembersMeanwhileIsKeptAndTheEditLandsOverIt() async throws {
        var held: ProfileClient?
        let service = try await Self.readThenOffline(client: &held)
        let client = held!
        let edit = Task { try await client.edit(id: 1, ProfileChanges(displayName: "Mine")) }
        #expect(await Eventually.waitAsync { await client.entry(id: 1)?.isPending == true })
        _ = service.change(1) { $0.fields["bio"] = "Theirs" }
        service.isOnline.withLock { $0 = true }
        _ = try await client.fetch(id: 1, policy: .reloadFromServer)  // an answer: the network is back
        let written = try await edit.value
        #expect(written.displayName == "Mine" && written.fields == ["bio": "Theirs"] && written.version == 3)
        #expect(service.edits.withLock { $0.map(\.status) } == [409, 200])
    }

    @Test func editsOfSeveralIDsGoOutInTheOrderMadeAndARefusalRollsBackOnlyItsOwn() async throws {
        let ids: [Int64] = [3, 1, 2]
        let service = FlakyService(ids.map { Self.profile($0, "Start", version: 1) })
        let client = Self.client(service)
        for id in ids { _ = try await client.fetch(id: id) }
        service.isOnline.withLock { $0 = false }
        service.refused.withLock { $0 = ["Refused"] }
        let names: [Int64: String] = [3: "Three", 1: "Refused", 2: "Two"]
        let recorders = Dictionary(uniqueKeysWithValues: ids.map { ($0, EventRecorder(client.events(for: $0))) })
        var edits: [Int64: Task<Profile, any Error>] = [:]
        for id in ids {
            edits[id] = Task { try await client.edit(id: id, ProfileChanges(displayName: names[id])) }
            #expect(await Eventually.waitAsync { await client.entry(id: id)?.isPending == true })
        }
        service.isOnline.withLock { $0 = true }
        client.resumeLiveUpdates()
        #expect(try await edits[3]!.value.displayName == "Three")
        await #expect(throws: ProfileClientError.validation(field: "display_name", detail: "invalid-field")) {
            try await edits[1]!.value
        }
        #expect(try await edits[2]!.value.displayName == "Two")
        #expect(service.edits.withLock { $0.map(\.id) } == [3, 1, 2], "in the order made")
        #expect(await recorders[1]!.wait { $0.last == .updated(Self.profile(1, "Start", version: 1)) }, "rolled back")
        #expect(await client.entry(id: 2)?.profile == Self.profile(2, "Two", version: 2))
        #expect(await client.entry(id: 3)?.profile == Self.profile(3, "Three", version: 2))
    }

    @Test func aNewEditTriesTheQueuedOnesAgainAtOnce() async throws {
        let service = FlakyService([Self.profile(1, "Start", version: 1)])
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.liveUpdates = LiveUpdatePolicy(initialDelay: .seconds(600), maximumDelay: .seconds(600))
        let client = ProfileClient(configuration: configuration, transport: service.transport, eventTransport: nil)
        _ = try await client.fetch(id: 1)
        service.isOnline.withLock { $0 = false }
        let first = Task { try await client.edit(id: 1, ProfileChanges(displayName: "First")) }
        try await Task.sleep(for: .milliseconds(100))  // its attempt found no network; the sender sleeps 5 to 10 min
        service.isOnline.withLock { $0 = true }  // back, and nothing of the client was answered yet
        let second = try await client.edit(id: 1, ProfileChanges(fields: ["bio": "Second"]))
        #expect(try await first.value.displayName == "First")
        #expect(second.displayName == "First" && second.fields == ["bio": "Second"] && second.version == 3)
    }

    @Test func anEditWhoseAnswerWasLostIsNotAppliedTwice() async throws {
        let service = FlakyService([Self.profile(1, "Start", version: 1)])
        let client = Self.client(service)
        _ = try await client.fetch(id: 1)
        service.losesNextAnswer.withLock { $0 = true }
        let written = try await client.edit(id: 1, ProfileChanges(displayName: "Once"))
        #expect(written == Self.profile(1, "Once", version: 2))
        #expect(service.profiles.withLock { $0[1]?.version } == 2, "applied once")
        #expect(service.edits.withLock { $0.map(\.status) } == [200, 409], "the second attempt found it there")
    }

    /// The date the store file says profile 1 was confirmed.
    static let confirmed = Date(timeIntervalSince1970: 1_700_000_000)

    /// A client started offline over a store file holding profile 1, confirmed at ``confirmed``.
    static func restoredOffline(file: URL) throws -> (FlakyService, ProfileClient) {
        try ProfileStoreFile(url: file).save([Self.profile(1, "Kept", version: 3)], confirmedAt: [1: confirmed])
        let service = FlakyService([Self.profile(1, "Kept", version: 3)])
        service.isOnline.withLock { $0 = false }
        return (service, Self.client(service, file: file))
    }

    @Test func anEntrySaysItIsFromTheStoreUntilTheServiceConfirmsIt() async throws {
        let file = PersistentStoreTests.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let confirmed = Self.confirmed
        let (service, client) = try Self.restoredOffline(file: file)
        let restored = try #require(await client.entry(id: 1))
        #expect(restored.isFromStore && restored.confirmedAt == confirmed && restored.profile?.version == 3)
        _ = try? await client.fetch(id: 1, policy: .reloadFromServer)
        #expect(await client.entry(id: 1)?.isFromStore == true, "no answer offline: still the store's")

        service.isOnline.withLock { $0 = true }
        _ = try await client.fetch(id: 1, policy: .reloadFromServer)
        let read = try #require(await client.entry(id: 1))
        #expect(!read.isFromStore && read.confirmedAt.map { $0 > confirmed } == true)
        try await client.saveStore()
        let saved = ProfileStoreFile(url: file).loadStore(maximumBytes: 1 << 20).profiles
        let savedAt = try #require(saved.first?.confirmedAt)
        #expect(abs(savedAt.timeIntervalSince(read.confirmedAt!)) < 0.001, "kept in the file")
    }

    @MainActor
    @Test func anObservableEntrySaysItIsFromTheStoreUntilTheServiceConfirmsIt() async throws {
        let file = PersistentStoreTests.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let confirmed = Self.confirmed
        let (service, client) = try Self.restoredOffline(file: file)
        let profiles = ObservableProfiles(client: client)
        let following = Task { await profiles.follow(1) }
        defer { following.cancel() }
        #expect(await ObservableProfilesTests.wait { profiles.entry(1)?.profile != nil })
        #expect(profiles.entry(1)?.isFromStore == true && profiles.entry(1)?.confirmedAt == confirmed)
        service.isOnline.withLock { $0 = true }
        _ = try await client.fetch(id: 1, policy: .reloadFromServer)  // the same version: nothing else changed
        #expect(await ObservableProfilesTests.wait { profiles.entry(1)?.isFromStore == false }, "\(String(describing: profiles.entry(1)))")
        #expect(profiles.entry(1)?.confirmedAt.map { $0 > confirmed } == true)
    }

    @Test func aStoreFileWithEditsRoundTripsAndAnOlderOneStillReads() throws {
        let file = PersistentStoreTests.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let edit = ProfileStoreFile.HeldEdit(
            id: 1, changes: ProfileChanges(displayName: "A", fields: ["bio": nil]), base: 3, isExact: false,
            seen: ["display_name": "Start", "bio": nil], over: nil)
        try ProfileStoreFile(url: file).save([Self.profile(1, "Start", version: 3)], edits: [edit])
        #expect(ProfileStoreFile(url: file).loadStore(maximumBytes: 1 << 20).edits == [edit])
        let older = #"{"format":1,"profiles":[{"id":1,"username":"u","display_name":"Old","version":2,"updated_at":"2026-01-01T00:00:02Z"}]}"#
        try Data(older.utf8).write(to: file)
        let held = ProfileStoreFile(url: file).loadStore(maximumBytes: 1 << 20)
        #expect(held.profiles.map(\.profile.displayName) == ["Old"] && held.profiles[0].confirmedAt == nil && held.edits.isEmpty)
    }
}
