import Foundation
import ProfileClient
import Synchronization
import Testing
import TestSupport

/// What crosses the network when following one profile, against the built service on the real
/// PostgreSQL and memcached: a deletion during `profilectl watch`, a token that expires while its
/// stream is open, and a newer event that arrives while a PUT fails.
@Suite(.serialized, .requires(.postgres, .memcached), .timeLimit(.minutes(2))) struct ProfileStreamServiceTests {
    static var profilectl: URL {
        ServiceProcess.executable.deletingLastPathComponent().appendingPathComponent("profilectl")
    }

    /// A token provider as apps write one: it keeps its token until told the service refused it.
    final class CachingTokenProvider: Sendable {
        let subject: String
        let ttlSeconds: Int
        private let cached = Mutex<String?>(nil)
        private let minted = Mutex(0)

        init(subject: String, ttlSeconds: Int) {
            self.subject = subject
            self.ttlSeconds = ttlSeconds
        }

        var tokensMinted: Int { minted.withLock { $0 } }

        func token() throws -> String {
            if let token = cached.withLock({ $0 }) { return token }
            let token = try ServiceProcess.token(subject: subject, ttlSeconds: ttlSeconds)
            minted.withLock { $0 += 1 }
            cached.withLock { $0 = token }
            return token
        }

        func rejected(_ token: String) {
            cached.withLock { if $0 == token { $0 = nil } }
        }
    }

    @Test func profilectlWatchPrintsADeletionDuringTheWatchAndTheProfileCreatedAgain() async throws {
        let service = try ServiceProcess()
        defer { service.terminate() }
        let admin = try ProfileListObservationServiceTests.admin(service)
        let id = ProfileClientServiceTests.randomID()
        let created = try await admin.create(id: id, username: "dw\(id % 100_000_000)", displayName: "Before")

        let watch = try PipedProcess(Self.profilectl, arguments: ["watch", String(id), "--url", service.baseURL, "--count", "3"])
        #expect(Eventually.wait(timeout: .seconds(10)) { watch.jsonLines.count >= 1 }, "\(watch.lines)")
        #expect(watch.jsonLines.first?["version"] as? Int == Int(created.version))

        try ProfileListObservationServiceTests.psql("DELETE FROM user_profiles WHERE id = \(id)")
        #expect(
            Eventually.wait(timeout: ProfileListObservationServiceTests.feedTimeout) { watch.jsonLines.count >= 2 },
            "\(watch.lines)")
        #expect(watch.jsonLines.last?["deleted"] as? Int == Int(id))

        let again = try await admin.create(id: id, username: "dw\(id % 100_000_000)", displayName: "After")
        #expect(Eventually.wait(timeout: .seconds(30)) { watch.jsonLines.count >= 3 }, "\(watch.lines)")
        #expect(watch.jsonLines.last?["display_name"] as? String == "After")
        #expect(watch.jsonLines.last?["version"] as? Int == Int(again.version))
        #expect(Eventually.wait(timeout: .seconds(10)) { !watch.isRunning }, "--count 3 ends it")
        #expect(!watch.isRunning && watch.waitUntilExit() == 0)
    }

    @Test func profilectlWatchExitsWithStatusOneWhenTheServiceRefusesTheStreamForGood() async throws {
        let service = try ServiceProcess(extraArguments: ["--require-auth-for-reads", "--jwt-leeway-s", "0"])
        defer { service.terminate() }
        let admin = try ProfileListObservationServiceTests.admin(service)
        let id = ProfileClientServiceTests.randomID()
        _ = try await admin.create(id: id, username: "ew\(id % 100_000_000)", displayName: "Watched")
        // A token that expires while the stream is open: the service ends the stream, and the
        // same token (read again from the file) is refused.
        let tokenFile = FileManager.default.temporaryDirectory.appendingPathComponent("profilectl-token-\(id)")
        try ServiceProcess.token(subject: String(id), ttlSeconds: 2).write(to: tokenFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: tokenFile) }

        let watch = try PipedProcess(
            Self.profilectl, arguments: ["watch", String(id), "--url", service.baseURL, "--token-file", tokenFile.path])
        #expect(Eventually.wait(timeout: .seconds(10)) { watch.jsonLines.count >= 1 }, "\(watch.lines)")
        #expect(Eventually.wait(timeout: .seconds(20)) { !watch.isRunning }, "a refusal for good ends the watch")
        #expect(!watch.isRunning && watch.waitUntilExit() == 1)
    }

    @Test func aTokenThatExpiresMidStreamIsReplacedAndNothingIsMissed() async throws {
        let service = try ServiceProcess(extraArguments: ["--require-auth-for-reads", "--jwt-leeway-s", "0"])
        defer { service.terminate() }
        let admin = try ProfileListObservationServiceTests.admin(service)
        let id = ProfileClientServiceTests.randomID()
        _ = try await admin.create(id: id, username: "tx\(id % 100_000_000)", displayName: "First")

        let tokens = CachingTokenProvider(subject: String(id), ttlSeconds: 2)
        var configuration = ProfileClientConfiguration(baseURL: service.url)
        configuration.tokenProvider = { try tokens.token() }
        configuration.tokenRejected = { tokens.rejected($0) }
        let tablet = ProfileClient(configuration: configuration)
        let updates = tablet.updates(for: id)
        let events = StreamRecorder(tablet.events(for: id))
        try await Task.sleep(for: .seconds(4))  // the first token expired, and its stream with it
        let renamed = try await admin.edit(id: id, ProfileChanges(displayName: "After the expiry"), expectedVersion: 1)
        let seen = await ProfileClientServiceTests.values(of: updates) { $0.version == renamed.version }
        #expect(seen.last == renamed, "\(seen)")
        #expect(tokens.tokensMinted >= 2, "a fresh token after the 401")
        #expect(!events.elements.contains { if case .failed(_, willRetry: false) = $0 { true } else { false } })
    }

    @Test func aNewerEventWhileAPutFailsNeverShowsTheOlderIntent() async throws {
        let service = try ServiceProcess()
        defer { service.terminate() }
        let id = ProfileClientServiceTests.randomID()
        let phone = try ProfileClientServiceTests.client(service, id: id)
        let tablet = try ProfileClientServiceTests.client(service, id: id, live: true)
        let created = try await phone.create(id: id, username: "ne\(id % 1_000_000)", displayName: "One")
        let log = StreamRecorder(tablet.events(for: id))
        _ = try await tablet.fetch(id: id)
        _ = try await phone.edit(id: id, ProfileChanges(displayName: "Two"), expectedVersion: created.version)
        let three = try await phone.edit(id: id, ProfileChanges(displayName: "Three"), expectedVersion: created.version + 1)
        #expect(await log.wait { $0.last == .updated(three) }, "the tablet's stream brings version 3: \(log.elements)")

        // The tablet still acts on version 1: its PUT fails with 409, and its intent (version 2)
        // is older than the version 3 it shows, so it is never shown.
        await #expect(throws: ProfileClientError.conflict(current: three)) {
            try await tablet.edit(id: id, ProfileChanges(displayName: "Tablet"), expectedVersion: created.version)
        }
        let seen = log.elements.compactMap { event -> Profile? in
            if case .updated(let profile) = event { return profile }
            return nil
        }
        #expect(seen.last == three, "\(seen)")
        #expect(!seen.contains { $0.displayName == "Tablet" }, "\(seen)")
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.version <= $1.version }, "\(seen)")
    }
}
