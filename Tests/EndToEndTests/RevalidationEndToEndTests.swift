import Foundation
import Glibc
import Logging
import MemcachedClient
import Synchronization
import Testing
import TestSupport

/// `If-None-Match` is a floor (issue 25; docs/design.md §2.1): a client revalidating the version it
/// holds is never answered 200 with an older one from a cache entry not yet repaired — the HTTP
/// cache that follows the protocol would replace its newer copy with it.
@Suite(.serialized, .requires(.postgres, .memcached)) struct RevalidationEndToEndTests {
    @Test func aRevalidationOfANewerVersionThanTheCacheHoldsIsAnsweredThatVersion() throws {
        // Without the change feed, which would repair the planted entry at a moment no test can wait for.
        let service = try ServiceProcess(extraArguments: ["--no-change-feed"])
        defer { service.terminate() }
        let (id, older) = try Self.profileAtVersionTwo(service)
        try #require(try Self.plant(older))

        let stale = try Curl.request("\(service.baseURL)/users/profile/\(id)")
        #expect(stale.headers["etag"] == "\"1\"", "without a floor the stale entry is served (what the floor is for)")
        try #require(try Self.plant(older))
        let revalidated = try Curl.request("\(service.baseURL)/users/profile/\(id)", headers: ["If-None-Match": "\"2\""])
        #expect(revalidated.status == 304, "the client's version is current")
        #expect(revalidated.headers["etag"] == "\"2\"")

        try #require(try Self.plant(older))
        let listed = try Curl.request("\(service.baseURL)/users/profile/\(id)", headers: ["If-None-Match": "W/\"1\", \"2\""])
        #expect(listed.status == 304 && listed.headers["etag"] == "\"2\"", "the highest version named is the floor")
    }

    /// The same under load, where a worker answers hits in batches from one multi-get: a batched
    /// hit below the floor goes back to be read alone.
    @Test func revalidationsAnsweredInBatchesAreNeverOlder() throws {
        let service = try ServiceProcess(extraArguments: ["--no-change-feed", "--no-access-log"])
        defer { service.terminate() }
        let (id, older) = try Self.profileAtVersionTwo(service)
        let answers = Mutex<[Int: Int]>([:])
        let olderAnswers = Atomic<Int>(0)
        let running = Atomic<Bool>(true)
        let clients = (0..<24).map { _ in
            TestThread {
                guard let client = try? HTTPTestClient(port: service.port) else { return }
                while running.load(ordering: .relaxed) {
                    guard (try? client.send("GET /users/profile/\(id) HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"2\"\r\n\r\n")) != nil,
                        let response = try? client.readResponse()
                    else { return }
                    answers.withLock { $0[response.status, default: 0] += 1 }
                    if response.status == 200, response.header("ETag") == "\"1\"" { olderAnswers.add(1, ordering: .relaxed) }
                }
            }
        }
        // Keep planting the older entry while the clients revalidate.
        // A plant that times out while 24 clients keep the machine busy is just not counted.
        let deadline = ContinuousClock.now + .seconds(2)
        var planted = 0
        while ContinuousClock.now < deadline {
            if (try? Self.plant(older)) == true { planted += 1 }
            usleep(2_000)
        }
        running.store(false, ordering: .relaxed)
        clients.forEach { $0.join() }
        let counts = answers.withLock { $0 }
        print("revalidations under load against a planted older entry: \(counts)")
        #expect(planted > 50, "the older entry was planted \(planted) times")
        #expect((counts[304] ?? 0) > 100)
        #expect(olderAnswers.load(ordering: .relaxed) == 0, "answered the older version with 200")
    }

    /// A profile created and updated through the service (version 2, cached), and its version 1.
    private static func profileAtVersionTwo(_ service: ServiceProcess) throws -> (Int64, String) {
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        let url = "\(service.baseURL)/users/profile/\(id)"
        let json = ["Content-Type": "application/json"].merging(ServiceProcess.bearer(String(id))) { $1 }
        let created = try Curl.request(
            url, method: "PUT", headers: json.merging(["If-None-Match": "*"]) { $1 },
            body: #"{"username":"rv\#(id % 1_000_000)","display_name":"First"}"#)
        try #require(created.status == 201, "\(created.body)")
        let updated = try Curl.request(url, method: "PUT", headers: json, body: #"{"display_name":"Second","version":1}"#)
        try #require(updated.status == 200, "\(updated.body)")
        return (id, created.body)
    }

    /// Sets the profile's cache entry to `json` behind the service's back; false when memcached
    /// did not store it.
    private static func plant(_ json: String) throws -> Bool {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let id = try #require(object["id"] as? Int64 ?? (object["id"] as? NSNumber)?.int64Value)
        let cache = try MemcachedConnection(
            configuration: try MemcachedConfiguration(servers: TestEnvironment.memcachedServerList),
            logger: Logger(label: "revalidation-tests"))
        defer { cache.close() }
        let stored = cache.set(ProfileCacheEntries.key(for: id), value: ProfileCacheEntries.entry(version: 1, json: Array(json.utf8)))
        return stored == .stored
    }
}
