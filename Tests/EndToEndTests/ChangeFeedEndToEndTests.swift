import Foundation
import Glibc
import Logging
import PostgresClient
import Synchronization
import Testing
import TestSupport

/// The change feed through the real binary (docs/design.md §3): two instances on one PostgreSQL
/// and memcached, the writing one killed with SIGKILL again and again while writers PUT.
@Suite(.serialized) struct ChangeFeedEndToEndTests {
    /// The writing instance, replaced after every kill; writers read the current port.
    private final class Target: Sendable {
        let port = Atomic<Int>(0)
    }

    /// What the writers saw: the highest version acknowledged (200) per id.
    private final class Acknowledged: Sendable {
        let versions = Mutex<[Int64: Int32]>([:])
        let answers = Atomic<Int>(0)

        func record(_ id: Int64, _ version: Int32) {
            answers.add(1, ordering: .relaxed)
            versions.withLock { $0[id] = max($0[id] ?? 0, version) }
        }
    }

    private static let logger = Logger(label: "test")

    private func sql() throws -> PostgresConnection {
        let connection = PostgresConnection(
            configuration: try PostgresConfiguration(url: TestEnvironment.databaseURL), statements: [], logger: Self.logger)
        try connection.connect()
        return connection
    }

    /// Versions of `ids` in PostgreSQL.
    private func rowVersions(_ ids: ClosedRange<Int64>, on connection: PostgresConnection) throws -> [Int64: Int32] {
        let result = try connection.simpleQuery(
            "SELECT id, version FROM user_profiles WHERE id BETWEEN \(ids.lowerBound) AND \(ids.upperBound)")
        var versions: [Int64: Int32] = [:]
        for row in result.rows { versions[try row.decode("id")] = try row.decode("version") }
        return versions
    }

    /// One PUT on a keep-alive connection; `nil` when the connection failed (the instance died).
    private func put(_ client: HTTPTestClient, id: Int64, version: Int32, token: String) -> (Int, Int32?)? {
        let body = #"{"display_name":"Writer \#(version + 1)","version":\#(version)}"#
        let request =
            "PUT /users/profile/\(id) HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            + "Authorization: Bearer \(token)\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        guard (try? client.send(request)) != nil, let response = try? client.readResponse() else { return nil }
        let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        return (response.status, (json?["version"] as? Int).map { Int32($0) })
    }

    @Test func theWriterKilledAgainAndAgainUnderLoadLeavesNoProfileStaleAndLosesNoAcknowledgedWrite() throws {
        let connection = try sql()
        defer { connection.close() }
        let base = Int64.random(in: 7_000_000_000...8_000_000_000) * 1000
        let ids = base...(base + 299)
        try connection.simpleQuery(
            "INSERT INTO user_profiles (id, username, display_name) SELECT g, 'soak' || g, 'Soak ' || g "
                + "FROM generate_series(\(ids.lowerBound), \(ids.upperBound)) AS g")

        let feedArguments = ProcessInfo.processInfo.environment["SOAK_WITHOUT_FEED"] == "1" ? ["--no-change-feed"] : []
        let stable = try ServiceProcess(extraArguments: feedArguments)
        // Every profile cached, as readers would have it.
        for id in ids { _ = try Curl.request("\(stable.baseURL)/users/profile/\(id)") }

        let target = Target()
        var writing = try ServiceProcess(extraArguments: feedArguments)
        target.port.store(writing.port, ordering: .relaxed)
        let token = ServiceProcess.bearer("soak", scope: "profiles:admin")["Authorization"]!.dropFirst(7)
        let acknowledged = Acknowledged()
        let stop = Atomic<Bool>(false)
        let writers = (0..<8).map { _ in
            TestThread { [token = String(token)] in
                var known: [Int64: Int32] = [:]
                var client: HTTPTestClient?
                while !stop.load(ordering: .relaxed) {
                    if client == nil { client = try? HTTPTestClient(port: target.port.load(ordering: .relaxed)) }
                    guard let connected = client else {
                        usleep(10_000)
                        continue
                    }
                    let id = Int64.random(in: ids)
                    switch put(connected, id: id, version: known[id] ?? 1, token: token) {
                    case (200, let version?)?:
                        acknowledged.record(id, version)
                        known[id] = version
                    case (409, let current?)?:
                        known[id] = current
                    case nil:
                        client = nil  // killed mid-request: the PUT may or may not have committed
                    default:
                        break
                    }
                }
            }
        }

        let started = Date()
        var kills = 0
        while Date().timeIntervalSince(started) < 12 {
            usleep(UInt32.random(in: 150_000...400_000))
            kill(writing.processIdentifier, SIGKILL)
            _ = writing.waitUntilExit()
            kills += 1
            writing = try ServiceProcess(extraArguments: feedArguments)
            target.port.store(writing.port, ordering: .relaxed)
        }
        stop.store(true, ordering: .relaxed)
        for writer in writers { writer.join() }
        let stopped = Date()

        // 5 s after the load stops, both instances serve every profile at its row's version.
        usleep(5_000_000)
        let rows = try rowVersions(ids, on: connection)
        var stale: [String] = []
        for instance in [stable, writing] {
            let client = try HTTPTestClient(port: instance.port)
            for id in ids {
                try client.send("GET /users/profile/\(id) HTTP/1.1\r\nHost: t\r\n\r\n")
                let body = try client.readResponse().body
                let json = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
                let served = json?["version"] as? Int
                if served != rows[id].map(Int.init) {
                    stale.append("\(id) via :\(instance.port): served \(served ?? -1), row \(rows[id] ?? -1)")
                }
            }
        }
        let lost = acknowledged.versions.withLock { versions in
            versions.filter { id, version in (rows[id] ?? 0) < version }
        }
        print(
            "soak: \(kills) SIGKILLs of the writing instance in 12 s, \(acknowledged.answers.load(ordering: .relaxed)) "
                + "acknowledged PUTs; \(stale.count) stale answers \(Date().timeIntervalSince(stopped).rounded()) s "
                + "after the load stopped; \(lost.count) acknowledged writes lost")
        #expect(kills >= 20)
        #expect(acknowledged.answers.load(ordering: .relaxed) > 100, "the writers made progress")
        #expect(stale.isEmpty, "stale after 5 s: \(stale.prefix(10))")
        #expect(lost.isEmpty, "acknowledged but not in PostgreSQL: \(lost.prefix(10))")
    }

    @Test func anUpdateInPsqlIsServedNewByEveryInstance() throws {
        let connection = try sql()
        defer { connection.close() }
        let a = try ServiceProcess()
        let b = try ServiceProcess()
        let id = Int64.random(in: 8_000_000_000_000...9_000_000_000_000)
        try connection.simpleQuery("INSERT INTO user_profiles (id, username, display_name) VALUES (\(id), 'p\(id)', 'Before')")
        for instance in [a, b] {
            #expect(try Curl.request("\(instance.baseURL)/users/profile/\(id)").json?["display_name"] as? String == "Before")
        }
        let psql = try TestProcess.run(
            URL(fileURLWithPath: "/usr/bin/psql"),
            [
                TestEnvironment.databaseURL, "-v", "ON_ERROR_STOP=1", "-c",
                "UPDATE user_profiles SET display_name = 'Support', version = version + 1 WHERE id = \(id)",
            ])
        #expect(psql.status == 0, "\(psql.standardError)")
        let deadline = Date().addingTimeInterval(2)
        var served: [String?] = []
        repeat {
            served = try [a, b].map { try Curl.request("\($0.baseURL)/users/profile/\(id)").json?["display_name"] as? String }
            if served == ["Support", "Support"] { break }
            usleep(20_000)
        } while Date() < deadline
        #expect(served == ["Support", "Support"], "both instances serve the psql change within 2 s")
        let ready = try Curl.request("\(a.baseURL)/readyz").json?["change_feed"] as? [String: Any]
        let readyB = try Curl.request("\(b.baseURL)/readyz").json?["change_feed"] as? [String: Any]
        #expect(
            Set([ready?["state"] as? String, readyB?["state"] as? String]) == ["active", "standby"],
            "one instance consumes, the other stands by")
    }
}
