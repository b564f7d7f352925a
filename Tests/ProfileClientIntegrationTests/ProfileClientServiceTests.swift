import Foundation
import Logging
import MemcachedClient
import ProfileClient
import Synchronization
import Testing
import TestSupport

/// ``ProfileClient`` against the built service, with JWT authentication, on the real PostgreSQL
/// and memcached of `scripts/deps.sh`. Evidence is the service's state (versions, names) and its
/// own counters (`/metrics`), never a pause that hopes something did or did not happen.
@Suite(.serialized, .requires(.postgres, .memcached), .timeLimit(.minutes(2))) struct ProfileClientServiceTests {
    static func randomID() -> Int64 { Int64.random(in: 1_000_000_000...9_000_000_000_000_000) }

    static func client(
        _ service: ServiceProcess, id: Int64, window: Duration = .seconds(10),
        retry: RetryPolicy = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(20)),
        live: Bool = false, onToken: (@Sendable () async throws -> Void)? = nil
    ) throws -> ProfileClient {
        let token = try ServiceProcess.token(subject: String(id))
        var configuration = ProfileClientConfiguration(baseURL: service.url)
        configuration.readYourWritesWindow = window
        configuration.retry = retry
        configuration.followsLiveUpdates = live
        configuration.tokenProvider = {
            try await onToken?()
            return token
        }
        return ProfileClient(configuration: configuration)
    }

    /// Puts `profile` at `version` into memcached as the service would, whatever PostgreSQL holds.
    static func plantCacheEntry(_ profile: Profile) throws {
        let cache = try MemcachedConnection(
            configuration: try MemcachedConfiguration(servers: TestEnvironment.memcachedServerList),
            logger: Logger(label: "profile-client-tests"))
        defer { cache.close() }
        let json = String(decoding: try JSONEncoder().encode(profile), as: UTF8.self)  // the service's JSON
        let result = cache.set(
            ProfileCacheEntries.key(for: profile.id),
            value: ProfileCacheEntries.entry(version: Int32(profile.version), json: Array(json.utf8)))
        try #require(result == .stored)
    }

    /// The profiles a stream gives until one satisfies `done`, or until `timeout`.
    static func values(
        of stream: AsyncStream<Profile>, until done: @escaping @Sendable (Profile) -> Bool,
        timeout: Duration = .seconds(10)
    ) async -> [Profile] {
        let reader = Task {
            var seen: [Profile] = []
            for await profile in stream {
                seen.append(profile)
                if done(profile) { break }
            }
            return seen
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            reader.cancel()
        }
        defer { timer.cancel() }
        return await reader.value
    }

    @Test func anObserverSeesAChangeMadeByAnotherDeviceThroughTheEventStream() async throws {
        let service = try ServiceProcess()
        defer { service.terminate() }
        let id = Self.randomID()
        let phone = try Self.client(service, id: id)
        let tablet = try Self.client(service, id: id, live: true)
        let created = try await phone.create(id: id, username: "lv\(id % 1_000_000)", displayName: "Phone")
        let updates = tablet.updates(for: id)
        // The tablet never fetches: the stream brings the current profile, then the phone's write.
        let renamer = Task {
            try await Task.sleep(for: .milliseconds(500))
            return try await phone.edit(id: id, ProfileChanges(displayName: "Renamed on the phone"), expectedVersion: created.version)
        }
        let seen = await Self.values(of: updates) { $0.version == 2 }
        let renamed = try await renamer.value
        #expect(seen.first == created)
        #expect(seen.last == renamed)
        // Read-your-writes on the tablet too: its next read passes what the stream delivered.
        #expect(try await tablet.fetch(id: id).version >= 2)
    }

    @Test func theWriterSeesItsWriteOverAStaleCacheEntryInsideTheWindowAndAfterIt() async throws {
        // Without the change feed: it would repair the planted stale entry at a moment no test can
        // wait for, and the client's answer to a stale entry is what this test is about.
        let withoutFeed = ["--no-change-feed"]
        var service = try ServiceProcess(extraArguments: withoutFeed)
        let id = Self.randomID()
        let client = try Self.client(service, id: id, window: .seconds(3))
        let created = try await client.create(id: id, username: "rw\(id % 1_000_000)", displayName: "First")
        #expect(created.version == 1)
        let written = try await client.edit(id: id, ProfileChanges(displayName: "Second"), expectedVersion: 1)
        let windowEnds = ContinuousClock.now + .seconds(3)  // the window began inside the call
        #expect(written.version == 2)

        // memcached now holds version 1 again: a reader without a token gets it.
        try Self.plantCacheEntry(created)
        let other = try Self.client(service, id: id)
        #expect(try await other.fetch(id: id) == created)

        // Inside the window the writer's read needs no network: it works with the service down.
        let port = service.port
        service.terminate()
        #expect(try await client.fetch(id: id) == written)

        // After the window, the read goes to the service with min_version=2, past the stale entry.
        service = try ServiceProcess(port: port, extraArguments: withoutFeed)
        try Self.plantCacheEntry(created)
        try await Task.sleep(until: windowEnds)
        #expect(try await client.fetch(id: id) == written)
        // It revalidates what the client holds (If-None-Match: "2"): 304, past the stale entry.
        #expect(try service.profileRequests("GET", status: 304) == 1, "the read after the window reached the service")
        #expect(try await other.fetch(id: id, policy: .reloadFromServer).version == 2)  // repaired for everyone
        service.terminate()
    }

    @Test func aConflictRollsBackToTheServersVersionAndIsNeverRetried() async throws {
        let service = try ServiceProcess()
        defer { service.terminate() }
        let id = Self.randomID()
        let bystander = try Self.client(service, id: id)
        // The token provider runs before every attempt: it counts what the client sent, and the
        // service's own counters say what arrived.
        let tokens = Mutex(0)
        let client = try Self.client(service, id: id) { tokens.withLock { $0 += 1 } }
        _ = try await client.create(id: id, username: "cf\(id % 1_000_000)", displayName: "Mine")  // token 1
        let theirs = try await bystander.edit(id: id, ProfileChanges(displayName: "Theirs"), expectedVersion: 1)
        let first = client.updates(for: id)
        let second = client.updates(for: id)

        await #expect(throws: ProfileClientError.conflict(current: theirs)) {  // token 2
            try await client.edit(id: id, ProfileChanges(displayName: "Lost"), expectedVersion: 1)
        }
        for stream in [first, second] {
            let seen = await Self.values(of: stream) { $0 == theirs }
            #expect(seen.map(\.displayName) == ["Mine", "Lost", "Theirs"])
        }
        do {
            _ = try await client.edit(id: id, ProfileChanges(displayName: ""), expectedVersion: 2)  // token 3
            Issue.record("an empty display name was accepted")
        } catch {
            guard case .validation(let field, _) = error else { throw error }
            #expect(field == "display_name")
        }
        #expect(tokens.withLock { $0 } == 3)  // create, the 409, the 422: one attempt each
        #expect(try service.profileRequests("PUT", status: 201) == 1)
        #expect(try service.profileRequests("PATCH", status: 200) == 1)  // the bystander's
        #expect(try service.profileRequests("PATCH", status: 409) == 1, "the conflicting write arrived once")
        #expect(try service.profileRequests("PATCH", status: 422) == 1, "the refused write arrived once")
        #expect(try await bystander.fetch(id: id, policy: .reloadFromServer) == theirs)
    }

    @Test func everyObserverOfAnIDReceivesAWriteMadeElsewhereInTheApp() async throws {
        let service = try ServiceProcess()
        defer { service.terminate() }
        let id = Self.randomID()
        let client = try Self.client(service, id: id)
        let observers = (0..<3).map { _ in client.updates(for: id) }
        // "Another part of the app": its own task, the same client instance.
        let writer = Task {
            let created = try await client.create(id: id, username: "ob\(id % 1_000_000)", displayName: "Start")
            return try await client.edit(id: id, ProfileChanges(displayName: "Renamed"), expectedVersion: created.version)
        }
        let written = try await writer.value
        for stream in observers {
            let seen = await Self.values(of: stream) { $0 == written }
            #expect(seen.first?.displayName == "Start")
            #expect(seen.dropFirst().first?.displayName == "Renamed")  // the optimistic one, before the answer
            #expect(seen.last == written)
        }
        let late = await Self.values(of: client.updates(for: id)) { _ in true }
        #expect(late == [written])  // a new observer starts with the latest profile
    }

    @Test func readsRetryThroughAServiceRestart() async throws {
        var service = try ServiceProcess()
        let id = Self.randomID()
        let patient = RetryPolicy(maximumAttempts: 40, initialDelay: .milliseconds(50), maximumDelay: .milliseconds(300))
        let setup = try Self.client(service, id: id)
        let created = try await setup.create(id: id, username: "rs\(id % 1_000_000)", displayName: "Restart")
        let port = service.port
        service.terminate()

        // The token provider runs before every attempt: two calls mean the first attempt was
        // refused and the client is retrying, which is when the service comes back.
        let readAttempts = Mutex(0)
        let reader = try Self.client(service, id: id, retry: patient) { readAttempts.withLock { $0 += 1 } }
        let read = Task { try await reader.fetch(id: id) }
        #expect(await Eventually.waitAsync { readAttempts.withLock { $0 } >= 2 }, "the reader never retried")
        service = try ServiceProcess(port: port)
        #expect(try await read.value == created)

        // A write is retried too when the connection was refused: it lands exactly once.
        service.terminate()
        let writeAttempts = Mutex(0)
        let writer = try Self.client(service, id: id, retry: patient) { writeAttempts.withLock { $0 += 1 } }
        let write = Task { try await writer.edit(id: id, ProfileChanges(displayName: "After"), expectedVersion: 1) }
        #expect(await Eventually.waitAsync { writeAttempts.withLock { $0 } >= 2 }, "the writer never retried")
        service = try ServiceProcess(port: port)
        #expect(try await write.value.version == 2)
        #expect(try service.profileRequests("PATCH", status: 200) == 1, "the retried write arrived once")
        #expect(try await reader.fetch(id: id, policy: .reloadFromServer).version == 2)
        service.terminate()
    }
}

/// Lookups by username and renames through ``ProfileClient`` against the built service.
@Suite(.serialized, .requires(.postgres, .memcached), .timeLimit(.minutes(2))) struct ProfileClientHandleServiceTests {
    @Test func aProfileFoundByUsernameShowsItsRenameLiveAndItsOldNameStillFindsIt() async throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let id = ProfileClientServiceTests.randomID()
        let old = "Cli_\(id % 100_000_000)"
        let new = "cli_new_\(id % 100_000_000)"
        let owner = try ProfileClientServiceTests.client(service, id: id, live: true)
        _ = try await owner.create(id: id, username: old, displayName: "Handle")

        let reader = try ProfileClientServiceTests.client(service, id: ProfileClientServiceTests.randomID(), live: true)
        let found = try await reader.fetch(username: old.uppercased())
        #expect(found.id == id && found.username == old)
        let updates = reader.updates(for: id)
        let renamed = try await owner.edit(id: id, ProfileChanges(username: new))
        #expect(renamed.username == new)
        let seen = await ProfileClientServiceTests.values(of: updates, until: { $0.username == new })
        #expect(seen.last?.username == new, "the reader following the id sees the rename: \(seen.map(\.username))")

        let byOld = try await reader.fetch(username: old)
        #expect(byOld.id == id && byOld.username == new, "the old name redirects to the profile")
        let byNew = try await owner.fetch(username: new)
        #expect(byNew.id == id && byNew.version == renamed.version, "the renamer reads its rename at once")
        let other = ProfileClientServiceTests.randomID()
        let taker = try ProfileClientServiceTests.client(service, id: other)
        await #expect(throws: ProfileClientError.usernameTaken) {
            _ = try await taker.create(id: other, username: old.lowercased(), displayName: "Taker")
        }
    }
}
