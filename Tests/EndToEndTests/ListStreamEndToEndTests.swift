import Foundation
import Synchronization
import TestSupport
import Testing

/// `GET /users/profiles/events?ids=…` black box against the built binary (issue 20; docs/design.md
/// §4.1): one stream for many profiles delivers every acknowledged version or a newer one — writes
/// through another instance, writes in SQL, memcached flushed every 5 ms —, never goes back per
/// member, resumes from floors without missing anything, and goes on past a member's deletion.
@Suite(.serialized, .requires(.postgres, .memcached)) struct ListStreamEndToEndTests {
    static func newID() -> Int64 { Int64.random(in: 1_000_000_000...9_000_000_000_000_000) }

    /// One statement at a psql prompt, as an operator runs it.
    static func psql(_ sql: String) throws {
        let result = try TestProcess.run(URL(fileURLWithPath: "/usr/bin/psql"), [TestEnvironment.databaseURL, "-qtAc", sql])
        #expect(result.standardError.isEmpty, "\(sql): \(result.standardError)")
    }

    /// Reads a list's stream on its own thread: the highest version seen per member, and any
    /// member that went back.
    final class StreamFollower: Sendable {
        final class Seen: Sendable {
            let versions = Mutex<[Int64: Int]>([:])
            let wentBack = Mutex<[String]>([])
            let events = Atomic<Int>(0)
            let closed = Atomic<Bool>(false)
            let running = Atomic<Bool>(true)
        }

        let seen = Seen()
        private let thread: TestThread
        var versions: [Int64: Int] { seen.versions.withLock { $0 } }
        var wentBack: [String] { seen.wentBack.withLock { $0 } }
        var events: Int { seen.events.load(ordering: .relaxed) }
        var closed: Bool { seen.closed.load(ordering: .relaxed) }

        init(port: Int, ids: [Int64], floors: [Int64: Int] = [:]) {
            let query = ids.map { id in floors[id].map { "\(id)@\($0)" } ?? "\(id)" }.joined(separator: ",")
            let path = "/users/profiles/events?ids=\(query)"
            let seen = seen
            thread = TestThread {
                guard let stream = try? EventStreamTestClient(port: port, path: path), (try? stream.head().status) == 200
                else {
                    seen.closed.store(true, ordering: .relaxed)
                    return
                }
                while seen.running.load(ordering: .relaxed) {
                    guard let event = try? stream.nextEvent(within: .milliseconds(100)) else {
                        if stream.isClosed {
                            seen.closed.store(true, ordering: .relaxed)
                            return
                        }
                        continue
                    }
                    seen.events.add(1, ordering: .relaxed)
                    guard event.event == "profile",
                        let json = try? JSONSerialization.jsonObject(with: Data(event.data.utf8)) as? [String: Any],
                        let id = (json["id"] as? Int).map(Int64.init), let version = json["version"] as? Int
                    else { continue }
                    seen.versions.withLock { versions in
                        if let last = versions[id], version <= last {
                            seen.wentBack.withLock { $0.append("\(id): \(version) after \(last)") }
                        }
                        versions[id] = max(versions[id] ?? 0, version)
                    }
                }
            }
        }

        func stop() {
            seen.running.store(false, ordering: .relaxed)
            thread.join()
        }
    }

    /// Writers through instance A and in SQL while memcached is flushed every 5 ms; a list's stream
    /// on instance B follows all twenty profiles. Halfway it is dropped and reopened with the
    /// versions it had as floors. Both streams never go back per member, and the second reaches
    /// every member's last acknowledged version.
    @Test func aListsStreamDeliversEveryAcknowledgedVersionOrANewer() throws {
        let a = try ServiceProcess(extraArguments: ["--no-access-log"])
        let b = try ServiceProcess(extraArguments: ["--no-access-log"])
        defer { _ = a.terminate(); _ = b.terminate() }
        let ids = (0..<20).map { _ in Self.newID() }
        for id in ids { try a.createProfile(id, usernamePrefix: "sl") }
        let first = StreamFollower(port: b.port, ids: ids)
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(10)) { first.versions.count == ids.count })
        let load = WriteLoad(ids: ids, servicePort: a.port, sqlWriters: 1)

        Thread.sleep(forTimeInterval: 1.5)
        first.stop()
        let floors = first.versions
        let second = StreamFollower(port: b.port, ids: ids, floors: floors)
        Thread.sleep(forTimeInterval: 1.5)
        load.stop()
        let final = load.acknowledged.withLock { $0 }

        let caughtUp = Eventually.wait(timeout: .seconds(10), interval: .milliseconds(20)) {
            let versions = second.versions
            return ids.allSatisfy { (versions[$0] ?? floors[$0] ?? 0) >= final[$0] ?? 1 }
        }
        second.stop()
        let resumed = second.versions
        let behind = ids.compactMap { id -> String? in
            let seen = resumed[id] ?? floors[id] ?? 0
            return seen < final[id] ?? 1 ? "\(id): \(seen) < \(final[id] ?? 1)" : nil
        }
        print(
            "list stream under writers and flushes: \(load.writes.load(ordering: .relaxed)) writes through A, "
                + "\(load.sqlWrites.load(ordering: .relaxed)) in SQL; B's streams got \(first.events) "
                + "+ \(second.events) events")
        #expect(load.writes.load(ordering: .relaxed) > 50)
        #expect(load.sqlWrites.load(ordering: .relaxed) > 50)
        #expect(load.flushes > 100)
        #expect(caughtUp, "every acknowledged version, or a newer one, reached the resumed stream: \(behind.prefix(5))")
        #expect(first.wentBack.isEmpty, "\(first.wentBack.prefix(5))")
        #expect(second.wentBack.isEmpty, "\(second.wentBack.prefix(5))")
        let belowFloor = ids.filter { (resumed[$0] ?? .max) <= floors[$0] ?? 0 }
        #expect(belowFloor.isEmpty, "the resumed stream sent nothing at or below the floors it was given")
        #expect(!first.closed && !second.closed)
    }

    /// A member deleted at a psql prompt is a `deleted` event; the stream goes on with the other
    /// members, and brings the member back when it is created again.
    @Test func aDeletedMemberIsAnEventOfItsOwnAndTheStreamGoesOn() throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let ids = (0..<3).map { _ in Self.newID() }
        for id in ids { try service.createProfile(id, usernamePrefix: "sd") }
        let absent = Self.newID()
        let stream = try EventStreamTestClient(
            port: service.port, path: "/users/profiles/events?ids=\(ids.map(String.init).joined(separator: ",")),\(absent)")
        #expect(try stream.head().status == 200)
        let opening = try stream.drainEvents(quietFor: .milliseconds(300))
        #expect(opening.map(\.event) == ["profile", "profile", "profile", "deleted"])
        #expect(opening.last?.data == #"{"id":\#(absent),"version":0}"#)

        try Self.psql("DELETE FROM user_profiles WHERE id = \(ids[1])")
        let deleted = try #require(try stream.nextEvent(within: .seconds(5)))
        #expect(deleted.event == "deleted")
        #expect(deleted.data == #"{"id":\#(ids[1]),"version":1}"#, "with its last version")

        try Self.psql("UPDATE user_profiles SET display_name = 'Still here' WHERE id = \(ids[2])")
        let changed = try #require(try stream.nextEvent(within: .seconds(5)))
        #expect(changed.event == "profile" && changed.data.contains("Still here"), "the stream goes on: \(changed)")

        try service.createProfile(ids[1], usernamePrefix: "sd2")
        let back = try #require(try stream.nextEvent(within: .seconds(5)))
        #expect(back.event == "profile")
        #expect(back.data.contains(#""id":\#(ids[1])"#) && back.id == "2", "created again above its last version (1): \(back)")
        #expect(!stream.isClosed)

        // The longest list there is — 1,000 ids of 19 digits, each with a 10-digit floor — fits
        // the request line (31 KB; the gateway's nginx takes 32k lines too).
        let longest = (0..<1_000).map { "\(9_000_000_000_000_000_000 + Int64($0))@2147483647" }.joined(separator: ",")
        let opened = try EventStreamTestClient(port: service.port, path: "/users/profiles/events?ids=\(longest)")
        #expect(try opened.head().status == 200)
        opened.close()

        let tooMany = try Curl.request(
            "\(service.baseURL)/users/profiles/events?ids=" + (1...1_001).map(String.init).joined(separator: ","))
        #expect(tooMany.status == 400)
        #expect(tooMany.json?["field"] as? String == "ids")
    }
}
