import Foundation
import ProfileClient
import Synchronization
import Testing
import TestSupport

/// ``ProfileClient/observeList(ids:)`` and `profilectl watch` of several ids against the built
/// service on the real PostgreSQL and memcached: the list's one stream brings a write by another
/// client, an `UPDATE` and a `DELETE` in SQL (the change feed's), a re-creation, and what was
/// committed while the service was down (the floors of the reconnection).
@Suite(.serialized, .requires(.postgres, .memcached), .timeLimit(.minutes(2))) struct ProfileListObservationServiceTests {
    /// How long a change committed in SQL may take to reach a stream: the change feed's holder
    /// of the slot may be another instance sharing this PostgreSQL.
    static let feedTimeout: Duration = .seconds(20)

    /// A client that may write every profile (`profiles:admin`).
    static func admin(_ service: ServiceProcess) throws -> ProfileClient {
        let token = try ServiceProcess.token(subject: "list-tests", scope: "profiles:admin")
        var configuration = ProfileClientConfiguration(baseURL: service.url)
        configuration.followsLiveUpdates = false
        configuration.tokenProvider = { token }
        return ProfileClient(configuration: configuration)
    }

    /// A client that only reads; it follows no stream per id, so whatever its observers of an id
    /// get live came through a list's stream.
    static func watcher(_ service: ServiceProcess) -> ProfileClient {
        var configuration = ProfileClientConfiguration(baseURL: service.url)
        configuration.followsLiveUpdates = false
        return ProfileClient(configuration: configuration)
    }

    /// Runs `sql` in psql, a client outside the service; returns what it printed.
    @discardableResult
    static func psql(_ sql: String) throws -> String {
        let result = try TestProcess.run(URL(fileURLWithPath: "/usr/bin/psql"), [TestEnvironment.databaseURL, "-qtAc", sql])
        try #require(result.status == 0, "\(result.standardError)")
        return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func createMembers(_ count: Int, with admin: ProfileClient) async throws -> [Profile] {
        var created: [Profile] = []
        for index in 0..<count {
            let id = ProfileClientServiceTests.randomID()
            created.append(try await admin.create(id: id, username: "ls\(id % 100_000_000)", displayName: "Member \(index)"))
        }
        return created
    }

    /// No member's version went down from one list to the next.
    static func neverWentBack(_ lists: [ProfileList]) -> Bool {
        var highest: [Int64: Int32] = [:]
        for list in lists {
            for profile in list.profiles {
                if profile.version < highest[profile.id] ?? 0 { return false }
                highest[profile.id] = profile.version
            }
        }
        return true
    }

    @Test func aListSeesAnotherClientsWriteAndChangesMadeInSQL() async throws {
        let service = try ServiceProcess()
        defer { service.terminate() }
        let admin = try Self.admin(service)
        let created = try await Self.createMembers(3, with: admin)
        let ids = created.map(\.id)
        let absent = ProfileClientServiceTests.randomID()
        let watcher = Self.watcher(service)
        let detail = watcher.updates(for: ids[2])
        let list = ListRecorder(watcher.observeList(ids: ids + [absent]))
        #expect(
            await list.wait { $0.last == ProfileList(profiles: created, missing: [absent]) },
            "the first list: \(list.seen), \(String(describing: list.error))")

        // A write through another client.
        let renamed = try await admin.edit(id: ids[1], ProfileChanges(displayName: "Renamed elsewhere"), expectedVersion: 1)
        #expect(await list.wait { $0.last?.profiles[1] == renamed }, "\(list.seen)")

        // An UPDATE in SQL, which only the change feed sees; it reaches the id's observers too.
        let version = try Self.psql(
            "UPDATE user_profiles SET display_name = 'Set in SQL' WHERE id = \(ids[2]) RETURNING version")
        let setInSQL: @Sendable (Profile) -> Bool = { $0.displayName == "Set in SQL" && String($0.version) == version }
        #expect(await list.wait(timeout: Self.feedTimeout) { $0.last.map { setInSQL($0.profiles[2]) } == true }, "\(list.seen)")
        let detailSeen = await ProfileClientServiceTests.values(of: detail, until: setInSQL)
        #expect(detailSeen.last.map(setInSQL) == true, "the detail observer got \(detailSeen)")

        // A DELETE in SQL: the member goes to missing and the stream goes on; created again, it is back.
        try Self.psql("DELETE FROM user_profiles WHERE id = \(ids[0])")
        #expect(await list.wait(timeout: Self.feedTimeout) { $0.last?.missing == [ids[0], absent] }, "\(list.seen)")
        let again = try await admin.create(id: ids[0], username: "lb\(ids[0] % 100_000_000)", displayName: "Back")
        #expect(again.version > created[0].version, "versions go on above the deleted row's")
        #expect(await list.wait { $0.last?.profiles.first == again && $0.last?.missing == [absent] }, "\(list.seen)")
        #expect(Self.neverWentBack(list.seen), "\(list.seen)")
        #expect(list.error == nil)
    }

    @Test func aListResumesFromItsFloorsAfterTheServiceComesBack() async throws {
        var service = try ServiceProcess()
        let admin = try Self.admin(service)
        let created = try await Self.createMembers(2, with: admin)
        let ids = created.map(\.id)
        let watcher = Self.watcher(service)  // kept: a list ends with its client
        let list = ListRecorder(watcher.observeList(ids: ids))
        #expect(await list.wait { $0.last == ProfileList(profiles: created, missing: []) }, "\(list.seen)")

        // Committed while no service runs: the reopened stream brings it, asked with the floors.
        let port = service.port
        service.terminate()
        let version = try Self.psql(
            "UPDATE user_profiles SET display_name = 'While down' WHERE id = \(ids[1]) RETURNING version")
        service = try ServiceProcess(port: port)
        defer { service.terminate() }
        #expect(
            await list.wait(timeout: .seconds(30)) {
                $0.last?.profiles[1].displayName == "While down" && $0.last.map { String($0.profiles[1].version) } == version
            }, "\(list.seen)")
        #expect(list.seen.last?.profiles[0] == created[0])
        #expect(Self.neverWentBack(list.seen), "\(list.seen)")
    }

    @Test func aLongListIsFollowedOverSeveralStreamsTheServiceAccepts() async throws {
        let service = try ServiceProcess()
        defer { service.terminate() }
        let admin = try Self.admin(service)
        let created = try await Self.createMembers(2, with: admin)
        // Over the 1,000 ids one stream takes: 1,202 are followed with two streams, each of long
        // ids within the service's 32 KiB request line.
        let absent = (0..<1_200).map { _ in ProfileClientServiceTests.randomID() }
        let ids = [created[0].id] + absent + [created[1].id]
        let watcher = Self.watcher(service)
        let list = ListRecorder(watcher.observeList(ids: ids))
        #expect(
            await list.wait { $0.last == ProfileList(profiles: created, missing: absent) },
            "\(list.seen.last.map { ($0.profiles.count, $0.missing.count) } as Any), \(String(describing: list.error))")
        let renamed = try await admin.edit(id: created[1].id, ProfileChanges(displayName: "At the end"), expectedVersion: 1)
        #expect(await list.wait { $0.last?.profiles.last == renamed })
        #expect(list.error == nil)
    }

    @Test func profilectlWatchOfSeveralIDsWritesEachChangeIntoAPipeAtOnce() async throws {
        let service = try ServiceProcess()
        defer { service.terminate() }
        let admin = try Self.admin(service)
        let created = try await Self.createMembers(2, with: admin)
        let absent = ProfileClientServiceTests.randomID()

        let watch = try PipedProcess(
            ServiceProcess.executable.deletingLastPathComponent().appendingPathComponent("profilectl"),
            arguments: ["watch"] + (created.map(\.id) + [absent]).map(String.init) + ["--url", service.baseURL, "--count", "5"])
        func lines() -> [[String: Any]] { watch.jsonLines }

        // The first lines reach the pipe while profilectl keeps watching: each id in order.
        #expect(Eventually.wait(timeout: .seconds(10)) { lines().count >= 3 }, "\(watch.lines)")
        #expect(watch.isRunning)
        #expect(lines().prefix(2).map { $0["id"] as? Int } == created.map { Int($0.id) })
        #expect(lines().dropFirst(2).first?["deleted"] as? Int == Int(absent))

        _ = try await admin.edit(id: created[1].id, ProfileChanges(displayName: "Second"), expectedVersion: 1)
        #expect(Eventually.wait(timeout: .seconds(10)) { lines().count >= 4 }, "\(lines())")
        #expect(lines().last?["display_name"] as? String == "Second")

        try Self.psql("DELETE FROM user_profiles WHERE id = \(created[0].id)")
        #expect(Eventually.wait(timeout: Self.feedTimeout) { lines().count >= 5 }, "\(lines())")
        #expect(lines().last?["deleted"] as? Int == Int(created[0].id))
        #expect(Eventually.wait(timeout: .seconds(5)) { !watch.isRunning }, "--count 5 ends it")
        #expect(watch.waitUntilExit() == 0)
    }
}

/// Reads a list stream in a task of its own and keeps every value it got.
final class ListRecorder: Sendable {
    private final class Seen: Sendable {
        let state = Mutex<(values: [ProfileList], error: (any Error)?)>(([], nil))
    }

    private let seenSoFar = Seen()
    private let task: Task<Void, Never>

    init(_ stream: AsyncThrowingStream<ProfileList, any Error>) {
        let seen = seenSoFar
        task = Task {
            do {
                for try await list in stream { seen.state.withLock { $0.values.append(list) } }
            } catch {
                seen.state.withLock { $0.error = error }
            }
        }
    }

    deinit { task.cancel() }

    var seen: [ProfileList] { seenSoFar.state.withLock { $0.values } }
    var error: (any Error)? { seenSoFar.state.withLock { $0.error } }

    /// Waits until `done` holds for the values seen; false if `timeout` passed first.
    func wait(timeout: Duration = .seconds(10), until done: ([ProfileList]) -> Bool) async -> Bool {
        await Eventually.waitAsync(timeout: timeout, interval: .milliseconds(10)) { done(seen) }
    }
}
