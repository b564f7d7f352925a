import Foundation
import Glibc
import Logging
import PostgresClient
import Testing
import TestSupport

/// Live updates (`GET /users/profile/{id}/events`) of the built binary, against the real
/// PostgreSQL and memcached. Cross-instance delivery is the real path: the change feed (running in
/// one of the instances) decodes the commit, repairs memcached and NOTIFYs `profile_changes`;
/// every instance LISTENs.
@Suite(.serialized, .requires(.postgres, .memcached)) struct LiveUpdatesEndToEndTests {
    /// A SQL session of the test's own, beside the services.
    final class SQLSession {
        let connection: PostgresConnection

        init() throws {
            connection = PostgresConnection(
                configuration: try PostgresConfiguration(url: TestEnvironment.databaseURL), statements: [],
                logger: Logger(label: "live-updates-tests"))
        }

        deinit { connection.close() }

        /// `UPDATE` in SQL, as psql would; returns the new version.
        func update(_ id: Int64, displayName: String) throws -> Int32 {
            let result = try connection.simpleQuery(
                "UPDATE user_profiles SET display_name = '\(displayName)', version = version + 1, updated_at = now() WHERE id = \(id) RETURNING version"
            )
            return try #require(result.rows.first).decode("version", as: Int32.self)
        }

        /// The backend pid of the service's `LISTEN` session(s).
        func listenerPIDs() throws -> [Int] {
            try connection.simpleQuery(
                "SELECT pid FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()"
            ).rows.map { try $0.decode("pid", as: Int.self) }
        }
    }

    /// `UPDATE` of a display name in `psql`, a client outside the service; returns the new version.
    static func psqlUpdate(_ id: Int64, displayName: String) throws -> Int32 {
        let sql = "UPDATE user_profiles SET display_name = '\(displayName)', version = version + 1, updated_at = now() WHERE id = \(id) RETURNING version"
        let result = try TestProcess.run(URL(fileURLWithPath: "/usr/bin/psql"), [TestEnvironment.databaseURL, "-qtAc", sql])
        return try #require(Int32(result.standardOutput.split(separator: "\n").first ?? ""), "\(result.standardError)")
    }

    /// Waits until one of `services` runs the active change-feed consumer (`/readyz`).
    static func waitForActiveFeed(_ services: [ServiceProcess]) throws {
        let deadline = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < deadline {
            for service in services {
                let body = try Curl.request("\(service.baseURL)/readyz").body
                if body.contains(#""state":"active""#) { return }
            }
            usleep(50_000)
        }
        Issue.record("no instance became the active change-feed consumer")
    }

    /// Opens a stream as a client would: a 503 (an instance still connecting to PostgreSQL on a
    /// loaded machine) is tried again shortly, for up to 10 s.
    static func openStream(port: Int, path: String) throws -> EventStreamTestClient {
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            let stream = try EventStreamTestClient(port: port, path: path)
            let head = try stream.head()
            if head.status == 200 { return stream }
            guard head.status == 503, ContinuousClock.now < deadline else {
                Issue.record("stream answered \(head.status): \(head.body)")
                return stream
            }
            usleep(100_000)
        }
    }

    static func newID() -> Int64 { Int64.random(in: 1_000_000_000...9_000_000_000_000_000) }

    /// Creates profile `id` at version 1 through `service`.
    static func create(_ id: Int64, on service: ServiceProcess) throws {
        try service.createProfile(id, usernamePrefix: "sse")
    }

    /// `PUT` of a new display name at `version`; returns the new version.
    static func rename(_ id: Int64, to name: String, from version: Int32, on service: ServiceProcess) throws -> Int32 {
        let response = try Curl.request(
            "\(service.baseURL)/users/profile/\(id)", method: "PUT", headers: ServiceProcess.writeHeaders(for: id),
            body: #"{"display_name":"\#(name)","version":\#(version)}"#)
        #expect(response.status == 200, "\(response.body)")
        return version + 1
    }

    static func version(of event: EventStreamTestClient.Event?) -> Int32? {
        event.flatMap { $0.id }.flatMap { Int32($0) }
    }

    static func percentile(_ values: [Duration], _ fraction: Double) -> Duration {
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction))]
    }

    static func milliseconds(_ duration: Duration) -> String {
        String(format: "%.1f ms", Double(duration.components.attoseconds) / 1e15 + Double(duration.components.seconds) * 1000)
    }

    // MARK: - Delivery

    @Test func twoHundredSubscribersOnBReceiveAWriteThroughAAndAnUpdateInSQL() throws {
        let a = try ServiceProcess()
        let b = try ServiceProcess(extraArguments: ["--max-streams-per-client", "0"])  // one load generator, one address
        defer { _ = a.terminate(); _ = b.terminate() }
        let id = Self.newID()
        try Self.create(id, on: a)
        try Self.waitForActiveFeed([a, b])

        let subscribers = try (0..<200).map { _ in try Self.openStream(port: b.port, path: "/users/profile/\(id)/events") }
        for stream in subscribers {
            #expect(Self.version(of: try stream.nextEvent(within: .seconds(5))) == 1, "the current profile first")
        }

        // A first write, not measured: the feed may still be catching up on commits of earlier
        // tests; once this one reaches B, everything before it has been applied.
        let warmUp = try Self.rename(id, to: "Warm-up", from: 1, on: a)
        for stream in subscribers {
            #expect(Self.version(of: try stream.nextEvent(within: .seconds(30))) == warmUp)
        }

        // A write through A: A answers; the feed decodes the commit, repairs memcached and
        // notifies; B fetches once and fans out.
        let version = try Self.rename(id, to: "Through A", from: warmUp, on: a)
        var started = ContinuousClock.now  // A's answer
        var latencies: [Duration] = []
        for stream in subscribers {
            let event = try stream.nextEvent(within: .seconds(2))
            #expect(Self.version(of: event) == version)
            latencies.append(ContinuousClock.now - started)
        }
        let slowestThroughA = latencies.max() ?? .zero
        print(
            "live updates: 200 subscribers on B, write through A: p50 \(Self.milliseconds(Self.percentile(latencies, 0.5))), "
                + "all within \(Self.milliseconds(slowestThroughA))")
        // Delivery is asserted by each stream's deadline above; the 1 s target is a figure the
        // line above prints (README, Live updates), not a timed assertion a loaded machine breaks.
        #expect(latencies.count == 200)

        // The event's data is GET's JSON, byte for byte.
        let get = try Curl.request("\(b.baseURL)/users/profile/\(id)?min_version=\(version)")
        let check = try EventStreamTestClient(port: b.port, path: "/users/profile/\(id)/events")
        #expect(try check.nextEvent(within: .seconds(2))?.data == get.body)

        // An UPDATE in psql: only the commit stream knows of it.
        let sqlVersion = try Self.psqlUpdate(id, displayName: "Through SQL")
        started = ContinuousClock.now  // psql has returned: committed
        latencies = []
        for stream in subscribers {
            let event = try stream.nextEvent(within: .seconds(3))
            #expect(Self.version(of: event) == sqlVersion)
            #expect(event?.data.contains("Through SQL") == true)
            latencies.append(ContinuousClock.now - started)
        }
        let slowestSQL = latencies.max() ?? .zero
        print("live updates: 200 subscribers on B, UPDATE in SQL: all within \(Self.milliseconds(slowestSQL))")
        let metrics = try Curl.request("\(b.baseURL)/metrics").body
        #expect(metrics.contains("profile_service_sse_subscribers 201"))
    }

    @Test func aStreamNeverGoesBackAndResumesByLastEventID() throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let id = Self.newID()
        try Self.create(id, on: service)
        var version = try Self.rename(id, to: "Two", from: 1, on: service)

        // Resumed at the current version: nothing is sent until a newer one.
        let resumed = try EventStreamTestClient(
            port: service.port, path: "/users/profile/\(id)/events", headers: ["Last-Event-ID": String(version)])
        let head = try resumed.head()
        #expect(head.status == 200)
        #expect(head.header("Content-Type") == "text/event-stream")
        #expect(head.header("Cache-Control") == "no-cache")
        #expect(head.header("X-Accel-Buffering") == "no")
        #expect(try resumed.nextEvent(within: .milliseconds(300)) == nil)
        #expect(resumed.retryHint != nil, "a retry: hint comes first")

        // Resumed one behind: the current version at once.
        let behind = try EventStreamTestClient(
            port: service.port, path: "/users/profile/\(id)/events", headers: ["Last-Event-ID": String(version - 1)])
        #expect(Self.version(of: try behind.nextEvent(within: .seconds(2))) == version)

        // Accept: text/event-stream on the profile's own URL is the same stream.
        let byAccept = try EventStreamTestClient(port: service.port, path: "/users/profile/\(id)")
        let first = try byAccept.nextEvent(within: .seconds(2))
        #expect(first?.event == "profile")
        #expect(Self.version(of: first) == version)

        // Several writes in a row: each stream sees versions only going up, ending at the last.
        for _ in 0..<5 { version = try Self.rename(id, to: "N\(version)", from: version, on: service) }
        for stream in [resumed, behind, byAccept] {
            let versions = try stream.drainEvents(quietFor: .milliseconds(500)).compactMap { Self.version(of: $0) }
            #expect(versions == versions.sorted() && Set(versions).count == versions.count)
            #expect(versions.last == version)
        }
    }

    @Test func badRequestsAreProblemDocumentsAndReadsFollowGETsRules() throws {
        let service = try ServiceProcess(extraArguments: ["--require-auth-for-reads"])
        defer { _ = service.terminate() }
        let id = Self.newID()
        try Self.create(id, on: service)
        let token = ServiceProcess.bearer("someone")

        let absent = try EventStreamTestClient(
            port: service.port, path: "/users/profile/\(Self.newID())/events", headers: token
        ).head()
        #expect(absent.status == 404)
        #expect(absent.header("Content-Type") == "application/problem+json")
        #expect(absent.body.contains("profile-not-found"))

        let malformed = try EventStreamTestClient(
            port: service.port, path: "/users/profile/\(id)/events",
            headers: token.merging(["Last-Event-ID": "seven"]) { $1 }
        ).head()
        #expect(malformed.status == 400)
        #expect(malformed.body.contains("invalid-last-event-id"))

        let badID = try EventStreamTestClient(port: service.port, path: "/users/profile/0x1/events", headers: token).head()
        #expect(badID.status == 400)

        let anonymous = try EventStreamTestClient(port: service.port, path: "/users/profile/\(id)/events").head()
        #expect(anonymous.status == 401)

        let allowed = try EventStreamTestClient(port: service.port, path: "/users/profile/\(id)/events", headers: token)
        #expect(try allowed.head().status == 200)
        #expect(Self.version(of: try allowed.nextEvent(within: .seconds(2))) == 1)
        // A refused stream holds nothing: metrics count only the open one.
        #expect(try Curl.request("\(service.baseURL)/metrics").body.contains("profile_service_sse_subscribers 1"))
    }

    // MARK: - Holding streams

    @Test func theSubscriberLimitAnswers503WithRetryAfter() throws {
        let service = try ServiceProcess(extraArguments: ["--max-subscribers", "2"])
        defer { _ = service.terminate() }
        let id = Self.newID()
        try Self.create(id, on: service)
        let path = "/users/profile/\(id)/events"
        let first = try EventStreamTestClient(port: service.port, path: path)
        let second = try EventStreamTestClient(port: service.port, path: path)
        #expect(try first.head().status == 200)
        #expect(try second.head().status == 200)
        let third = try EventStreamTestClient(port: service.port, path: path).head()
        #expect(third.status == 503)
        #expect(third.header("Retry-After") != nil)

        // A closed stream frees its place (the server notices the EOF).
        first.close()
        var reopened = 0
        let deadline = ContinuousClock.now + .seconds(5)
        while reopened != 200, ContinuousClock.now < deadline {
            reopened = try EventStreamTestClient(port: service.port, path: path).head().status
            if reopened != 200 { usleep(50_000) }
        }
        #expect(reopened == 200)
        #expect(try Curl.request("\(service.baseURL)/metrics").body.contains("profile_service_sse_subscribers_refused_total"))
    }

    @Test func aSubscriberThatStopsReadingIsCut() throws {
        let service = try ServiceProcess(extraArguments: ["--sse-buffer-bytes", "4096"])
        defer { _ = service.terminate() }
        let id = Self.newID()
        try Self.create(id, on: service)
        let stalled = try EventStreamTestClient(
            port: service.port, path: "/users/profile/\(id)/events", receiveBufferBytes: 4096)
        let reader = try EventStreamTestClient(port: service.port, path: "/users/profile/\(id)/events")
        #expect(try stalled.head().status == 200)
        #expect(try reader.head().status == 200)

        // Writes over one keep-alive connection; the stalled stream never reads.
        let writer = try HTTPTestClient(port: service.port)
        let headers = ServiceProcess.writeHeaders(for: id).map { "\($0.key): \($0.value)\r\n" }.joined()
        let name = String(repeating: "x", count: 60)
        var version: Int32 = 1
        var cut = false
        while !cut, version < 2000 {
            let body = #"{"display_name":"\#(name)","version":\#(version)}"#
            try writer.send(
                "PUT /users/profile/\(id) HTTP/1.1\r\nHost: x\r\n\(headers)Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
            #expect(try writer.readResponse().status == 200)
            version += 1
            if version % 50 == 0 {
                cut = try Curl.request("\(service.baseURL)/metrics").body.contains("profile_service_sse_subscribers_cut_slow_total 1")
            }
            // The reader keeps up and is never cut.
            _ = try reader.nextEvent(within: .zero)
        }
        #expect(cut, "the stalled stream was cut after \(version) events")
        #expect(stalled.waitForClose(within: .seconds(5)), "the stalled stream ends")
        let rest = try reader.drainEvents(quietFor: .milliseconds(300))
        #expect(Self.version(of: rest.last) == version || rest.isEmpty)
        #expect(!reader.isClosed)
    }

    @Test func deadlinesDoNotCutALiveStreamAndHeartbeatsFlow() throws {
        let service = try ServiceProcess(extraArguments: [
            "--idle-timeout-s", "1", "--head-timeout-s", "1", "--sse-heartbeat-s", "1",
        ])
        defer { _ = service.terminate() }
        let id = Self.newID()
        try Self.create(id, on: service)
        let stream = try EventStreamTestClient(port: service.port, path: "/users/profile/\(id)/events")
        #expect(Self.version(of: try stream.nextEvent(within: .seconds(2))) == 1)
        // Three seconds: beyond the 1 s idle and head deadlines; heartbeats arrive meanwhile.
        #expect(try stream.nextEvent(within: .seconds(3)) == nil)
        #expect(!stream.isClosed)
        #expect(stream.comments >= 2)
        let version = try Self.rename(id, to: "Still here", from: 1, on: service)
        #expect(Self.version(of: try stream.nextEvent(within: .seconds(2))) == version)
    }

    @Test func sigtermClosesStreamsDuringTheDrain() throws {
        let service = try ServiceProcess(extraArguments: ["--drain-timeout-s", "5"])
        let id = Self.newID()
        try Self.create(id, on: service)
        let stream = try EventStreamTestClient(port: service.port, path: "/users/profile/\(id)/events")
        #expect(Self.version(of: try stream.nextEvent(within: .seconds(2))) == 1)
        let started = ContinuousClock.now
        kill(service.processIdentifier, SIGTERM)
        #expect(stream.waitForClose(within: .seconds(3)))
        #expect(ContinuousClock.now - started < .seconds(3), "closed at the drain, not at its timeout")
        #expect(service.waitUntilExit() == 0)
    }

    @Test func deletingTheProfileEndsItsStreams() throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let id = Self.newID()
        try Self.create(id, on: service)
        try Self.waitForActiveFeed([service])
        let stream = try EventStreamTestClient(port: service.port, path: "/users/profile/\(id)/events")
        #expect(Self.version(of: try stream.nextEvent(within: .seconds(2))) == 1)
        let sql = try SQLSession()
        try sql.connection.simpleQuery("DELETE FROM user_profiles WHERE id = \(id)")
        #expect(stream.waitForClose(within: .seconds(3)), "the feed announces \(id):0 and the stream ends")
        let again = try EventStreamTestClient(port: service.port, path: "/users/profile/\(id)/events").head()
        #expect(again.status == 404)
    }

    // MARK: - Losing the change source

    @Test func aListenerThatLosesPostgreSQLResendsTheCurrentProfileOnReconnect() throws {
        // No change feed anywhere: the UPDATE below is never announced, as if its NOTIFY was lost.
        let service = try ServiceProcess(extraArguments: ["--no-change-feed"])
        defer { _ = service.terminate() }
        let sql = try SQLSession()
        let id = Self.newID()
        try Self.create(id, on: service)
        let stream = try EventStreamTestClient(port: service.port, path: "/users/profile/\(id)/events")
        #expect(Self.version(of: try stream.nextEvent(within: .seconds(2))) == 1)

        // A change whose notification is lost (none is sent), then the listener's session dies.
        let version = try sql.update(id, displayName: "Missed")
        var pids: [Int] = []
        let deadline = ContinuousClock.now + .seconds(5)
        while pids.isEmpty, ContinuousClock.now < deadline { pids = try sql.listenerPIDs() }
        #expect(!pids.isEmpty, "the service LISTENs")
        #expect(try stream.nextEvent(within: .milliseconds(500)) == nil, "nobody announced the UPDATE")
        for pid in pids { try sql.connection.simpleQuery("SELECT pg_terminate_backend(\(pid))") }

        let event = try stream.nextEvent(within: .seconds(5))
        #expect(Self.version(of: event) == version, "resynchronised after reconnecting")
        #expect(event?.data.contains("Missed") == true)
    }
}
