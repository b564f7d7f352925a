import Foundation
import Logging
import MemcachedClient
import PostgresClient
import Testing
import TestSupport

/// `DELETE /users/profile/{id}` of the built binary, two instances on the real PostgreSQL and
/// memcached: what the deletion erases, and what it leaves.
@Suite(.serialized, .requires(.postgres, .memcached)) struct ProfileDeletionEndToEndTests {
    @Test func aDeletionErasesTheProfileEverywhereAndLeavesOnlyItsLastVersion() throws {
        let writer = try ServiceProcess()
        let reader = try ServiceProcess()
        defer {
            _ = writer.terminate()
            _ = reader.terminate()
        }
        let id = LiveUpdatesEndToEndTests.newID()
        let secret = "Erased \(id)"
        try writer.createProfile(id, usernamePrefix: "gone", displayName: secret)
        try LiveUpdatesEndToEndTests.waitForActiveFeed([writer, reader])
        let url = { (service: ServiceProcess) in "\(service.baseURL)/users/profile/\(id)" }
        #expect(try Curl.request(url(reader)).status == 200)
        #expect(try Curl.request(url(reader)).headers["x-cache"] == "hit", "cached before the deletion")
        let stream = try EventStreamTestClient(port: reader.port, path: "/users/profile/\(id)/events")
        #expect(LiveUpdatesEndToEndTests.version(of: try stream.nextEvent(within: .seconds(2))) == 1)

        let deleted = try Curl.request(url(writer), method: "DELETE", headers: ServiceProcess.bearer(String(id)))
        #expect(deleted.status == 204, "\(deleted.body)")
        #expect(try Curl.request(url(writer)).status == 404, "the deleter reads its own deletion")
        #expect(try Curl.request(url(reader)).status == 404, "and so does everyone after it")
        // The other instance's stream says so, with the last version, and ends.
        let last = try stream.nextEvent(within: .seconds(3))
        #expect(last?.event == "deleted" && last?.data == #"{"id":\#(id),"version":1}"#, "\(String(describing: last))")
        #expect(stream.waitForClose(within: .seconds(3)), "the other instance's stream ends")

        // No node holds the profile: each key is absent or a record of the absence.
        let cache = try MemcachedConnection(
            configuration: try MemcachedConfiguration(servers: TestEnvironment.memcachedServerList),
            logger: Logger(label: "e2e"))
        defer { cache.close() }
        switch cache.get(ProfileCacheEntries.key(for: id)) {
        case .hit(let item): #expect(ProfileCacheEntries.isAbsent(item.value), "\(item.value)")
        case .miss: break
        case .failure(let error): Issue.record("memcached: \(error)")
        }

        // PostgreSQL keeps the id and its last version, and nothing of what the profile said.
        let sql = try TestDatabase.primary()
        defer { sql.close() }
        #expect(try sql.simpleQuery("SELECT 1 FROM user_profiles WHERE id = \(id)").rows.isEmpty)
        let columns = try sql.simpleQuery(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'user_profile_tombstones' ORDER BY column_name"
        ).rows.map { try $0.decode("column_name", as: String.self) }
        #expect(columns == ["deleted_at", "id", "version"])
        let tombstone = try sql.simpleQuery("SELECT version FROM user_profile_tombstones WHERE id = \(id)").rows
        #expect(try tombstone.first?.decode("version", as: Int32.self) == 1)

        // Created again, it continues its versions; no log line carried the deleted name.
        try writer.createProfile(id, usernamePrefix: "back", displayName: "Back")
        #expect(try Curl.request(url(reader) + "?min_version=2").json?["version"] as? Int == 2)
        #expect(!writer.log.contains(secret) && !reader.log.contains(secret))
    }
}
