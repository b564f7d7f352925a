import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient

/// The store kept between launches (``ProfileClientConfiguration/persistenceFile``): a cold start
/// shows the last known profiles at once, revalidates them with `If-None-Match`, and `clear()`
/// forgets them.
@Suite(.timeLimit(.minutes(1))) struct PersistentStoreTests {
    static func file() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("profile-store-\(UUID()).json")
    }

    static func client(_ transport: FakeTransport, file: URL, interval: Duration = .milliseconds(20)) -> ProfileClient {
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.persistenceFile = file
        configuration.persistenceInterval = interval
        configuration.retry = RetryPolicy(maximumAttempts: 1)
        return ProfileClient(configuration: configuration, transport: transport, eventTransport: nil)
    }

    @Test func aStoreWrittenByOneClientIsShownAtOnceByTheNextAndRevalidated() async throws {
        let file = Self.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let online = FakeTransport { request, _ throws(TransportError) in
            FakeTransport.json(FakeTransport.profile(Int64(request.url.lastPathComponent)!, "Saved", version: 3))
        }
        let first = Self.client(online, file: file)
        for id in Int64(1)...3 { _ = try await first.fetch(id: id) }
        try await first.saveStore()
        #expect(FileManager.default.fileExists(atPath: file.path))

        // The next launch, offline: the profiles are there before any answer.
        let offline = FakeTransport { _, _ throws(TransportError) in
            throw TransportError(kind: .offline, description: "offline")
        }
        let second = Self.client(offline, file: file)
        let seen = EventRecorder(second.events(for: 2))
        #expect(await seen.wait { $0.first == .updated(FakeTransport.profile(2, "Saved", version: 3)) })
        await #expect(throws: ProfileClientError.offline) { try await second.fetch(id: 2, policy: .reloadFromServer) }
        #expect(offline.requests.first?.headers["If-None-Match"] == "\"3\"", "revalidated, not read whole")
        #expect(offline.requests.first?.url.query == "min_version=3", "and never older than what was shown")

        // Back online: a 304 answers from the restored profile.
        let revalidating = FakeTransport { _, _ throws(TransportError) in TransportResponse(status: 304) }
        let third = Self.client(revalidating, file: file)
        #expect(try await third.fetch(id: 1, policy: .reloadFromServer) == FakeTransport.profile(1, "Saved", version: 3))
    }

    @Test func changesAreWrittenByThemselvesAndClearRemovesEverything() async throws {
        let file = Self.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let transport = FakeTransport { _, _ throws(TransportError) in
            FakeTransport.json(FakeTransport.profile(7, "Kept", version: 1))
        }
        let client = Self.client(transport, file: file)
        _ = try await client.fetch(id: 7)
        #expect(
            await Eventually.waitAsync(timeout: .seconds(5)) { FileManager.default.fileExists(atPath: file.path) },
            "written within the persistence interval, without saveStore()")
        #expect(ProfileStoreFile(url: file).load(maximumBytes: 1 << 20).map(\.id) == [7])
        await client.clear()
        #expect(!FileManager.default.fileExists(atPath: file.path))
        try await Task.sleep(for: .milliseconds(100))  // five persistence intervals
        #expect(!FileManager.default.fileExists(atPath: file.path), "nothing cleared is written back")
        #expect(await client.cache.confirmedProfile(id: 7) == nil)
        #expect(await client.cache.floor(id: 7) == nil)
    }

    @Test func aFileThatIsNotAStoreIsIgnored() async throws {
        let file = Self.file()
        defer { try? FileManager.default.removeItem(at: file) }
        try Data("not json".utf8).write(to: file)
        let client = Self.client(FakeTransport { _, _ throws(TransportError) in TransportResponse(status: 404) }, file: file)
        #expect(await client.cache.count == 0)
    }

    @Test func aFailedWriteIsTriedAgain() async throws {
        let directory = Self.file()
        let file = directory.appendingPathComponent("profiles.json")
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data("in the way".utf8).write(to: directory)  // the store's directory cannot be made
        let transport = FakeTransport { _, _ throws(TransportError) in
            FakeTransport.json(FakeTransport.profile(7, "Kept", version: 1))
        }
        let client = Self.client(transport, file: file, interval: .seconds(3_600))
        _ = try await client.fetch(id: 7)
        await #expect(throws: (any Error).self) { try await client.saveStore() }

        try FileManager.default.removeItem(at: directory)
        try await client.saveStore()
        #expect(ProfileStoreFile(url: file).load(maximumBytes: 1 << 20).map(\.id) == [7], "the changes are still unsaved")
    }

    @Test func aRevalidationThatChangesNothingDoesNotRewriteTheFile() async throws {
        let file = Self.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let answer = Mutex(FakeTransport.json(FakeTransport.profile(7, "Kept", version: 1)))
        let transport = FakeTransport { _, _ throws(TransportError) in answer.withLock { $0 } }
        let client = Self.client(transport, file: file, interval: .seconds(3_600))
        _ = try await client.fetch(id: 7)
        try await client.saveStore()
        try FileManager.default.removeItem(at: file)  // so that a rewrite shows

        answer.withLock { $0 = TransportResponse(status: 304) }
        #expect(try await client.fetch(id: 7, policy: .reloadFromServer).version == 1)
        try await client.saveStore()
        #expect(!FileManager.default.fileExists(atPath: file.path), "a 304 changed nothing the file holds")

        answer.withLock { $0 = FakeTransport.json(FakeTransport.profile(7, "Changed", version: 2)) }
        _ = try await client.fetch(id: 7, policy: .reloadFromServer)
        try await client.saveStore()
        #expect(ProfileStoreFile(url: file).load(maximumBytes: 1 << 20).map(\.version) == [2])
    }

    @Test func makingAClientDoesNotReadTheFileItsFirstUseDoes() async throws {
        let file = Self.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let client = Self.client(
            FakeTransport { _, _ throws(TransportError) in TransportResponse(status: 304) }, file: file,
            interval: .seconds(3_600))
        // The file appears after the client was made (an app's launch), before its first use.
        try ProfileStoreFile(url: file).save([FakeTransport.profile(2, "Saved", version: 3)])

        let seen = EventRecorder(client.events(for: 2))
        #expect(
            await seen.wait { $0.first == .updated(FakeTransport.profile(2, "Saved", version: 3)) },
            "read at the first use, not in init: \(seen.events)")
        #expect(try await client.fetch(id: 2, policy: .reloadFromServer).version == 3, "a 304 answers from it")
    }
}
