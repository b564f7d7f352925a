import Foundation
import PostgresClient
import Testing
import TestSupport

/// Lookups by handle on the built binary with the real servers (docs/design.md §12):
/// - a rename and a deletion at a psql prompt reach every cache cluster within 2 s — the new
///   handle found though both clusters had cached that no one held it, the old one redirected,
///   the deleted holder's handle 404 — through the change feed alone;
/// - lookups of names no one holds reach PostgreSQL about once per name, and a name taken
///   afterwards is found at once;
/// - after a reservation ends another profile takes the handle, and no cache answers the
///   profile that gave it up.
@Suite(.serialized, .requires(.postgres, .memcached)) struct HandlesEndToEndTests {
    @Test func aRenameAndADeletionInPsqlReachEveryCacheClusterWithinTwoSeconds() throws {
        let region = try CacheClustersEndToEndTests.RegionB()
        defer { region.stop() }
        let a = try ServiceProcess(arguments: ServiceProcess.jwtArguments + ["--no-access-log"])
        defer { _ = a.terminate() }
        let b = try region.instance()
        defer {
            _ = b.terminate()
            _ = try? ServiceProcess.run(["cache-cluster", "drop", region.cluster, "--database-url", TestEnvironment.databaseURL])
        }
        try CacheClustersEndToEndTests().requireEveryClusterConsumed(seenBy: [a, b], clusters: ["default", region.cluster])

        let connection = try TestDatabase.primary()
        defer { connection.close() }
        let id = try TestDatabase.insertProfiles(
            1, blocks: 4_100_000_000...4_200_000_000, usernamePrefix: "psql_", namePrefix: "Handle", on: connection)[0]
        let old = "psql_\(id)"
        let new = "Renamed_\(id % 1_000_000_000)"
        // Both clusters hold the old handle as the profile's and the new one as no one's.
        for instance in [a, b] {
            #expect(try lookUp(old, via: instance).status == 200)
            #expect(try lookUp(new, via: instance).status == 404)
            #expect(try lookUp(new, via: instance).status == 404)
        }

        try psql("UPDATE user_profiles SET username = '\(new)' WHERE id = \(id)")
        var changed = Date()
        let renamed = [a, b].map { instance in
            Self.within(.seconds(2), since: changed) {
                let found = try? lookUp(new.lowercased(), via: instance)
                let redirect = try? lookUp(old, via: instance)
                return found?.status == 200 && found?.json?["id"] as? Int64 == id && redirect?.status == 308
                    && redirect?.headers["location"] == "/users/by-username/\(new)"
            }
        }
        #expect(renamed.allSatisfy { $0 != nil }, "the rename reaches both clusters within 2 s: \(renamed)")

        try psql("DELETE FROM user_profiles WHERE id = \(id)")
        changed = Date()
        let deleted = [a, b].map { instance in
            Self.within(.seconds(2), since: changed) {
                (try? lookUp(new, via: instance))?.status == 404 && (try? lookUp(old, via: instance))?.status == 404
            }
        }
        #expect(deleted.allSatisfy { $0 != nil }, "the deletion reaches both clusters within 2 s: \(deleted)")
        print("handles across clusters: a psql rename served after \(Self.milliseconds(renamed)), a deletion after \(Self.milliseconds(deleted))")
        let taken = try psqlStatus("INSERT INTO user_profiles (id, username, display_name) VALUES (\(id + 1), '\(new.uppercased())', 'X')")
        #expect(taken.status != 0 && taken.standardError.contains("reserved"), "a deleted holder's handle is kept: \(taken.standardError)")
    }

    @Test func lookupsOfAbsentNamesReachPostgreSQLAboutOncePerNameAndACreationIsFoundAtOnce() throws {
        let instance = try ServiceProcess(arguments: ServiceProcess.jwtArguments + ["--no-access-log"])
        defer { _ = instance.terminate() }
        let names = (0..<40).map { "absent_\(UInt32.random(in: 0...UInt32.max))_\($0)" }
        let before = try handleDatabaseReads(instance)
        let threads = (0..<8).map { thread in
            TestThread {
                for round in 0..<10 {
                    for name in names.shuffled() where (round + thread) % 2 == 0 || name.hasSuffix("0") {
                        _ = try? lookUp(name, via: instance)
                    }
                }
            }
        }
        for thread in threads { thread.join() }
        let reads = try handleDatabaseReads(instance) - before
        print("handles: lookups of \(names.count) absent names from 8 threads, 10 rounds: \(reads) PostgreSQL reads of handles")
        #expect(reads >= names.count && reads <= names.count * 2, "about one read per name, not one per lookup: \(reads)")

        // A name no one held, taken now, is found at once: its creation deletes the record of no one.
        let id = Int64.random(in: 4_300_000_000_000...4_400_000_000_000)
        let created = try Curl.request(
            "\(instance.baseURL)/users/profile/\(id)", method: "PUT",
            headers: ServiceProcess.writeHeaders(for: id).merging(["If-None-Match": "*"]) { $1 },
            body: #"{"username":"\#(names[0])","display_name":"Newcomer"}"#)
        #expect(created.status == 201, "\(created.body)")
        #expect(try lookUp(names[0], via: instance).json?["id"] as? Int64 == id)
    }

    @Test func afterItsReservationAHandleGoesToItsNewHolderInEveryAnswer() throws {
        try psql("UPDATE profile_handle_settings SET reservation = '1 second'")
        defer { _ = try? psql("UPDATE profile_handle_settings SET reservation = '30 days'") }
        let instances = [
            try ServiceProcess(arguments: ServiceProcess.jwtArguments + ["--no-access-log"]),
            try ServiceProcess(arguments: ServiceProcess.jwtArguments + ["--no-access-log"]),
        ]
        defer { for instance in instances { _ = instance.terminate() } }
        let connection = try TestDatabase.primary()
        defer { connection.close() }
        let ids = try TestDatabase.insertProfiles(
            2, blocks: 4_500_000_000...4_600_000_000, usernamePrefix: "res_", namePrefix: "Reserved", on: connection)
        let handle = "res_\(ids[0])"
        for instance in instances { #expect(try lookUp(handle, via: instance).json?["id"] as? Int64 == ids[0]) }

        // The first gives the handle up through one instance; the second may not take it yet.
        #expect(try rename(ids[0], to: "gone_\(ids[0] % 1_000_000_000)", via: instances[0]).status == 200)
        #expect(try rename(ids[1], to: handle, via: instances[1]).status == 409)
        for instance in instances { #expect(try lookUp(handle, via: instance).status == 308) }
        Thread.sleep(forTimeInterval: 1.2)
        let taken = try rename(ids[1], to: handle, via: instances[1])
        #expect(taken.status == 200, "\(taken.body)")
        // Every instance answers the new holder at once (its writer invalidated the handle; the
        // old entries contradict the profile that gave it up).
        for instance in instances {
            let found = try lookUp(handle, via: instance)
            #expect(found.status == 200 && found.json?["id"] as? Int64 == ids[1], "\(instance.port): \(found.status) \(found.body)")
        }
    }

    // MARK: - Helpers

    private func lookUp(_ username: String, via instance: ServiceProcess) throws -> Curl.Response {
        try Curl.request("\(instance.baseURL)/users/by-username/\(username)")
    }

    private func rename(_ id: Int64, to username: String, via instance: ServiceProcess) throws -> Curl.Response {
        try Curl.request(
            "\(instance.baseURL)/users/profile/\(id)", method: "PATCH",
            headers: ServiceProcess.bearer(String(id)).merging(["Content-Type": "application/merge-patch+json"]) { $1 },
            body: #"{"username":"\#(username)"}"#)
    }

    private func psqlStatus(_ sql: String) throws -> TestProcess.Finished {
        try TestProcess.run(URL(fileURLWithPath: "/usr/bin/psql"), [TestEnvironment.databaseURL, "-v", "ON_ERROR_STOP=1", "-c", sql])
    }

    private func psql(_ sql: String) throws {
        let finished = try psqlStatus(sql)
        #expect(finished.status == 0, "\(sql): \(finished.standardError)")
    }

    private func handleDatabaseReads(_ instance: ServiceProcess) throws -> Int {
        let metrics = try instance.metrics()
        return Int(metrics.value("profile_service_cache_events_total", ["event": "handle_database_read"]) ?? 0)
    }

    /// Seconds until `condition` held, polled every 10 ms from `start`; nil when it did not within `limit`.
    private static func within(_ limit: Duration, since start: Date, _ condition: () -> Bool) -> TimeInterval? {
        let deadline = start.addingTimeInterval(Double(limit.components.seconds))
        while Date() < deadline {
            if condition() { return Date().timeIntervalSince(start) }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return nil
    }

    private static func milliseconds(_ times: [TimeInterval?]) -> String {
        times.map { $0.map { "\(Int($0 * 1000)) ms" } ?? "never" }.joined(separator: " / ")
    }
}
