import Foundation
import Synchronization
import TestSupport
import Testing

/// `GET /users/profiles?ids=…` black box against the built binary (issue 20; docs/design.md §2.7):
/// shape, order, `missing`, floors, 400s, ETag and 304, HEAD — and, under writers and a memcached
/// flush every 5 ms, no member ever older than its floor.
@Suite(.serialized, .requires(.postgres, .memcached)) struct ListsEndToEndTests {
    static func newID() -> Int64 { Int64.random(in: 1_000_000_000...9_000_000_000_000_000) }

    @Test func aListAnswersEveryRuleOfTheContract() throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let ids = (0..<3).map { _ in Self.newID() }
        for id in ids { try service.createProfile(id, usernamePrefix: "ls") }
        let absent = Self.newID()
        let url = "\(service.baseURL)/users/profiles?ids=\(ids[1]),\(absent),\(ids[0])@1,\(ids[2]),\(ids[1])"

        let listed = try Curl.request(url)
        #expect(listed.status == 200)
        let profiles = (listed.json?["profiles"] as? [[String: Any]]) ?? []
        #expect(profiles.compactMap { ($0["id"] as? Int).map(Int64.init) } == [ids[1], ids[0], ids[2]])
        #expect(listed.json?["missing"] as? [Int] == [Int(absent)])
        #expect(profiles.allSatisfy { ($0["version"] as? Int) == 1 && ($0["username"] as? String)?.hasPrefix("ls") == true })
        let single = try Curl.request("\(service.baseURL)/users/profile/\(ids[0])")
        #expect(listed.body.contains(single.body), "a member is what its own GET answers")

        let tag = try #require(listed.headers["etag"])
        #expect(try Curl.request(url, headers: ["If-None-Match": tag]).status == 304)
        let head = try Curl.request(url, method: "HEAD")
        #expect(head.status == 200 && head.headers["etag"] == tag && head.body.isEmpty)

        // A write through the service: the list's tag changes and a floor at the new version holds.
        let updated = try Curl.request(
            "\(service.baseURL)/users/profile/\(ids[0])", method: "PUT", headers: ServiceProcess.writeHeaders(for: ids[0]),
            body: #"{"display_name":"Second","version":1}"#)
        #expect(updated.status == 200)
        let after = try Curl.request(url, headers: ["If-None-Match": tag])
        #expect(after.status == 200)
        #expect(after.headers["etag"] != tag)
        let floored = try Curl.request("\(service.baseURL)/users/profiles?ids=\(ids[0])@2")
        #expect(((floored.json?["profiles"] as? [[String: Any]])?.first?["version"] as? Int) == 2)

        for bad in ["", "?ids=", "?ids=1,,2", "?ids=0", "?ids=1@0", "?ids=" + (1...101).map(String.init).joined(separator: ",")] {
            let refused = try Curl.request("\(service.baseURL)/users/profiles\(bad)")
            #expect(refused.status == 400, "\(bad)")
            #expect(refused.json?["field"] as? String == "ids", "\(bad): \(refused.body)")
            #expect((refused.json?["type"] as? String)?.hasSuffix(":invalid-ids") == true)
        }
        #expect(try Curl.request("\(service.baseURL)/users/profiles?ids=1", method: "PUT").status == 405)
    }

    /// Two instances on the same PostgreSQL and memcached: a write through A, then a list read
    /// through B with the written version as the floor answers it at once (read-your-writes
    /// across instances), and B's list without a floor is never older once the feed has applied it.
    @Test func aWriteThroughOneInstanceIsListedByTheOtherAtItsFloor() throws {
        let a = try ServiceProcess()
        let b = try ServiceProcess()
        defer { _ = a.terminate(); _ = b.terminate() }
        let ids = (0..<5).map { _ in Self.newID() }
        for id in ids { try a.createProfile(id, usernamePrefix: "l2") }
        let listURL = "\(b.baseURL)/users/profiles?ids=" + ids.map(String.init).joined(separator: ",")
        #expect(try Curl.request(listURL).status == 200)  // B has every member cached at version 1

        for round in 1...3 {
            let id = ids[round]
            let written = try Curl.request(
                "\(a.baseURL)/users/profile/\(id)", method: "PUT", headers: ServiceProcess.writeHeaders(for: id),
                body: #"{"display_name":"Round \#(round)","version":1}"#)
            #expect(written.status == 200)
            let floored = try Curl.request("\(b.baseURL)/users/profiles?ids=\(ids[0]),\(id)@2")
            let versions = (floored.json?["profiles"] as? [[String: Any]])?.compactMap { $0["version"] as? Int }
            #expect(versions == [1, 2], "the writer's floor on the other instance: \(floored.body)")
        }
        // Without floors, the change feed brings B's cache up within moments.
        #expect(
            Eventually.wait(timeout: .seconds(5), interval: .milliseconds(20)) {
                let listed = try? Curl.request(listURL)
                let versions = (listed?.json?["profiles"] as? [[String: Any]])?.compactMap { $0["version"] as? Int }
                return versions == [1, 2, 2, 2, 1]
            })
    }

    /// Writers raise versions — through the service, and in SQL behind its back (the cache learns
    /// of those only from the change feed, milliseconds later) — while memcached is flushed every
    /// 5 ms and readers read the list with each member's last acknowledged version as its floor: no
    /// member is ever answered older (the stale-set races stay closed per member while entries
    /// vanish, and a floor reads past an entry the feed has not repaired yet).
    @Test func underWritersAndFlushesNoMemberIsOlderThanItsFloor() throws {
        let service = try ServiceProcess(extraArguments: ["--no-access-log"])
        defer { _ = service.terminate() }
        let ids = (0..<20).map { _ in Self.newID() }
        for id in ids { try service.createProfile(id, usernamePrefix: "lf") }
        let load = WriteLoad(ids: ids, servicePort: service.port)
        let violations = Mutex<[String]>([])
        let lists = Atomic<Int>(0)
        let readers = (0..<4).map { _ in
            TestThread {
                guard let client = try? HTTPTestClient(port: service.port) else { return }
                while load.isRunning {
                    let floors = load.acknowledged.withLock { $0 }
                    let query = ids.map { "\($0)@\(floors[$0] ?? 1)" }.joined(separator: ",")
                    guard (try? client.send("GET /users/profiles?ids=\(query) HTTP/1.1\r\nHost: t\r\n\r\n")) != nil,
                        let response = try? client.readResponse()
                    else { return }
                    guard response.status == 200,
                        let json = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
                        let profiles = json["profiles"] as? [[String: Any]]
                    else { continue }  // a 503 (no waiting place) is not an older answer
                    lists.add(1, ordering: .relaxed)
                    for profile in profiles {
                        guard let id = (profile["id"] as? Int).map(Int64.init), let version = profile["version"] as? Int
                        else { continue }
                        if version < floors[id] ?? 1 {
                            violations.withLock { $0.append("\(id): \(version) < floor \(floors[id] ?? 1)") }
                        }
                    }
                }
            }
        }
        Thread.sleep(forTimeInterval: 3)
        load.stop()
        readers.forEach { $0.join() }

        print(
            "lists under writers and flushes: \(lists.load(ordering: .relaxed)) lists of 20 read, "
                + "\(load.writes.load(ordering: .relaxed)) writes through the service, "
                + "\(load.sqlWrites.load(ordering: .relaxed)) in SQL, \(load.flushes) flushes of every node")
        #expect(lists.load(ordering: .relaxed) > 50)
        #expect(load.writes.load(ordering: .relaxed) > 50)
        #expect(load.sqlWrites.load(ordering: .relaxed) > 50)
        #expect(load.flushes > 100)
        #expect(violations.withLock { $0 }.isEmpty, "\(violations.withLock { $0.prefix(5) })")
    }
}
