import Foundation
import Glibc
import Logging
import MemcachedClient
import PostgresClient
import Synchronization
import Testing
import TestSupport

/// Read replicas through the built binary (issue 22): instances that read the rows of misses from
/// the streaming standby of `scripts/deps.sh start-standby`, which each test starts (with the
/// apply delay it needs) and stops at its end.
///
/// - With a standby applying every commit 300 ms late, writers through one instance and in SQL,
///   memcached flushed every 5 ms: no reader ever sees a version older than one it saw before or
///   than its floor, nothing is stale once the writers stop, and the consistency observer finds no
///   violation — also while the instances are SIGKILLed again and again.
/// - Under a flush storm with no writes, at least 90 % of the rows read for misses come from the
///   standby (the issue's target, as a share of `/metrics` counts).
/// - A standby killed (SIGKILL) or frozen (SIGSTOP) under load fails no read; reads move to the
///   primary and come back to the standby when it returns.
@Suite(.serialized, .requires(.postgres, .memcached)) struct ReplicaEndToEndTests {
    /// The late standby of the consistency tests: its `recovery_min_apply_delay`.
    static let lateApplyDelayMS = 300

    /// `PROFILE_PG_STANDBY_PORT`, as `scripts/deps.sh` reads it (default 55442).
    static var standbyPort: Int { Int(TestEnvironment.variable("PROFILE_PG_STANDBY_PORT") ?? "") ?? 55442 }
    static var standbyURL: String { "postgres://postgres@127.0.0.1:\(standbyPort)/profiles" }

    /// Every change the feed applies is checked by the consistency observer 500 ms later.
    static let everyChangeChecked = ["--consistency-sample-rate", "1", "--consistency-check-delay-ms", "500"]

    /// `serve` arguments of an instance that reads misses from the standby.
    static func replicaArguments(_ extra: [String] = []) -> [String] {
        ServiceProcess.jwtArguments + ["--no-access-log", "--replica-database-url", standbyURL] + extra
    }

    private static let logger = Logger(label: "replica-test")

    // MARK: - The tests

    /// Writers through A and in SQL, in spells of 0.8 s with 0.8 s of quiet between (while writing
    /// the 300 ms-late standby is behind every position a read takes; in the quiet it catches up
    /// and answers misses), memcached flushed every 5 ms. Readers on B and A: plain GETs never go
    /// back from a version the same reader saw (a populate from the late standby, unproven, would
    /// bring back a row up to 300 ms old), and GETs with `min_version` = the last acknowledged
    /// version are never below it nor 404.
    @Test func aStandby300MsLateSendsNoReaderBackAndLeavesNothingStale() throws {
        try startStandby(applyDelayMS: Self.lateApplyDelayMS)
        defer { stopStandby() }
        let connection = try primary()
        defer { connection.close() }
        let ids = try insertProfiles(20, on: connection)
        let a = try ServiceProcess(arguments: Self.replicaArguments(Self.everyChangeChecked))
        let b = try ServiceProcess(arguments: Self.replicaArguments(Self.everyChangeChecked))
        defer { _ = a.terminate(); _ = b.terminate() }
        try requireStandbyUp(on: [a, b])
        let before = try RowSources(port: b.port)

        let load = WriteLoad(ids: ids, servicePort: a.port)
        let floor: @Sendable (Int64) -> Int = { id in load.acknowledged.withLock { $0[id] ?? 1 } }
        let readers = [
            Readers(port: b.port, ids: ids, threads: 3),
            Readers(port: b.port, ids: ids, threads: 2, floors: floor),
            Readers(port: a.port, ids: ids, threads: 1),
            Readers(port: a.port, ids: ids, threads: 1, floors: floor),
        ]
        let spells = QuietSpells(load: load)
        Thread.sleep(forTimeInterval: 8)
        spells.stop()
        load.stop()
        readers.forEach { $0.stop() }
        let onB = try RowSources(port: b.port) - before

        // The feed applies the last SQL writes within milliseconds; the observer checks them 500 ms later.
        Thread.sleep(forTimeInterval: 2)
        let stale = try staleness(of: ids, servedBy: [a, b], on: connection)
        let checks = try [a, b].map { try ChangeFeedEndToEndTests.consistencyChecks(port: $0.port) }
            .reduce(into: [String: Int]()) { total, checks in total.merge(checks, uniquingKeysWith: +) }
        let tally = Readers.Tally(readers)
        print(
            "replicas, 300 ms-late standby: \(load.writes.load(ordering: .relaxed)) writes through A, "
                + "\(load.sqlWrites.load(ordering: .relaxed)) in SQL, \(load.flushes) flushes; "
                + "\(tally); rows of B's reads: \(onB); consistency checks of A and B: \(checks); \(stale.count) stale")
        #expect(load.writes.load(ordering: .relaxed) > 50)
        #expect(load.sqlWrites.load(ordering: .relaxed) > 50)
        #expect(load.flushes > 100)
        #expect(tally.answers > 1_000)
        #expect(tally.wentBack.isEmpty, "a reader saw a version older than one it had seen: \(tally.wentBack.prefix(5))")
        #expect(tally.belowFloor.isEmpty, "below the acknowledged version: \(tally.belowFloor.prefix(5))")
        #expect(tally.failures.isEmpty, "answers other than 200: \(tally.failures)")
        #expect(onB.standby > 0, "the standby answered misses of B in the quiet spells")
        #expect(onB.behind > 0, "the standby was found behind while the writers wrote")
        #expect(stale.isEmpty, "\(stale.prefix(10))")
        #expect(checks["consistent", default: 0] > 100, "the observer checked the applied changes")
        #expect(checks["violation", default: 0] == 0, "the observer found a stale entry")
    }

    /// The same load and readers; the instance consuming the change feed is SIGKILLed six times
    /// and started again on its port (the feed usually passes to the other, so the kills hit both
    /// A, through which the writers write, and B; more kills until A's second). Afterwards nothing is stale,
    /// every acknowledged write is in PostgreSQL, and the observers found no violation.
    @Test func killingTheInstancesAgainAndAgainWithA300MsLateStandbyLeavesNothingStaleAndLosesNoWrite() throws {
        try startStandby(applyDelayMS: Self.lateApplyDelayMS)
        defer { stopStandby() }
        let connection = try primary()
        defer { connection.close() }
        let ids = try insertProfiles(20, on: connection)
        var instances = try (0..<2).map { _ in try ServiceProcess(arguments: Self.replicaArguments(Self.everyChangeChecked)) }
        defer { for instance in instances { _ = instance.terminate() } }
        try requireStandbyUp(on: instances)
        let writing = instances[0].port

        let load = WriteLoad(ids: ids, servicePort: writing)
        let floor: @Sendable (Int64) -> Int = { id in load.acknowledged.withLock { $0[id] ?? 1 } }
        let readers = instances.flatMap { instance in
            [
                Readers(port: instance.port, ids: ids, threads: 2),
                Readers(port: instance.port, ids: ids, threads: 1, floors: floor),
            ]
        }
        let spells = QuietSpells(load: load)
        var loadStopped = false
        func stopLoad() {
            spells.stop()
            load.stop()
            readers.forEach { $0.stop() }
            loadStopped = true
        }
        defer { if !loadStopped { stopLoad() } }  // a restart that failed
        // The observers' counts, read from each victim just before its kill.
        var checks: [String: Int] = [:]
        var kills = 0
        var takeovers = 0
        var writerKills = 0
        // Six kills, and more (up to twelve) until two hit the writing instance: a restarted
        // victim can win the slot back before the other's next takeover try, so the kills need not
        // alternate.
        while kills < 6 || (writerKills < 2 && kills < 12) {
            Thread.sleep(forTimeInterval: Double.random(in: 0.6...1.2))
            let states = instances.map(feedState)
            let victim = states.firstIndex(of: "active") ?? 0
            if states[victim] == "active" { takeovers += 1 }
            if instances[victim].port == writing { writerKills += 1 }
            for (result, count) in (try? ChangeFeedEndToEndTests.consistencyChecks(port: instances[victim].port)) ?? [:] {
                checks[result, default: 0] += count
            }
            kill(instances[victim].processIdentifier, SIGKILL)
            _ = instances[victim].waitUntilExit()
            kills += 1
            instances[victim] = try ServiceProcess(
                port: instances[victim].port, arguments: Self.replicaArguments(Self.everyChangeChecked))
        }
        stopLoad()

        // A consumer again (the last kill's takeover), then time to apply and check what it missed.
        let consuming = Eventually.wait(timeout: .seconds(30), interval: .milliseconds(100)) {
            instances.map(feedState).contains("active")
        }
        Thread.sleep(forTimeInterval: 2)
        let stale = try staleness(of: ids, servedBy: instances, on: connection)
        let rows = try rowVersions(ids, on: connection)
        let lost = load.acknowledged.withLock { acknowledged in
            acknowledged.filter { id, version in (rows[id] ?? 0) < version }
                .map { id, version in "\(id): row \(rows[id] ?? 0) < acknowledged \(version)" }
        }
        for instance in instances {
            for (result, count) in try ChangeFeedEndToEndTests.consistencyChecks(port: instance.port) {
                checks[result, default: 0] += count
            }
        }
        let sources = try instances.map { try RowSources(port: $0.port) }
        let tally = Readers.Tally(readers)
        print(
            "replicas, crash drill with a 300 ms-late standby: \(kills) SIGKILLs (\(takeovers) of the active consumer, "
                + "\(writerKills) of the writing instance), \(load.writes.load(ordering: .relaxed)) writes through A, "
                + "\(load.sqlWrites.load(ordering: .relaxed)) in SQL; \(tally); rows read since the last starts: "
                + "\(sources.map(\.description)); consistency checks (a kill cuts some short): \(checks); "
                + "\(stale.count) stale, \(lost.count) acknowledged writes lost")
        #expect(consuming, "an instance consumes the change feed again")
        #expect(takeovers >= 3 && writerKills >= 2, "the kills hit the consumer and the writing instance")
        #expect(load.writes.load(ordering: .relaxed) > 50)
        #expect(load.sqlWrites.load(ordering: .relaxed) > 50)
        #expect(tally.answers > 1_000)
        #expect(tally.wentBack.isEmpty, "a reader saw a version older than one it had seen: \(tally.wentBack.prefix(5))")
        #expect(tally.belowFloor.isEmpty, "below the acknowledged version: \(tally.belowFloor.prefix(5))")
        #expect(tally.failures.isEmpty, "answers other than 200: \(tally.failures)")
        #expect(stale.isEmpty, "\(stale.prefix(10))")
        #expect(lost.isEmpty, "acknowledged but not in PostgreSQL: \(lost.prefix(10))")
        #expect(checks["consistent", default: 0] > 100, "the observers checked the applied changes")
        #expect(checks["violation", default: 0] == 0, "an observer found a stale entry")
    }

    /// 2,000 profiles read by 8 threads for 3 s while memcached is emptied every 2 ms, no writes,
    /// a standby with no apply delay: at least 90 % of the rows read for misses come from it.
    @Test func underAFlushStormTheStandbyReadsAtLeast90PercentOfTheRowsOfMisses() throws {
        try startStandby(applyDelayMS: 0)
        defer { stopStandby() }
        let connection = try primary()
        defer { connection.close() }
        let ids = try insertProfiles(2_000, on: connection)
        let service = try ServiceProcess(arguments: Self.replicaArguments())
        defer { _ = service.terminate() }
        try requireStandbyUp(on: [service])

        let before = try RowSources(port: service.port)
        let servedBefore = try #require(replicaStatus(service)?["reads_served"] as? Int)
        let flusher = MemcachedFlusher(every: .milliseconds(2))
        let readers = Readers(port: service.port, ids: ids, threads: 8)
        Thread.sleep(forTimeInterval: 3)
        readers.stop()
        flusher.stop()
        let storm = try RowSources(port: service.port) - before
        let served = try #require(replicaStatus(service)?["reads_served"] as? Int) - servedBefore

        let tally = Readers.Tally([readers])
        let share = storm.standbyShare
        print(
            "replicas, flush storm: \(tally), \(flusher.flushes) flushes of every node; rows of "
                + "misses: \(storm); /readyz reads_served +\(served); standby share \(String(format: "%.1f", share * 100)) % "
                + "(target ≥ 90 %)")
        #expect(served == storm.standby, "/readyz counts the rows the standby served as /metrics does")
        #expect(flusher.flushes > 300)
        #expect(storm.standby + storm.primary > 500, "the storm made misses (enough rows to measure the share)")
        #expect(share >= 0.9, "\(storm)")
        #expect(tally.failures.isEmpty, "answers other than 200: \(tally.failures)")
        #expect(tally.wentBack.isEmpty, "\(tally.wentBack.prefix(5))")
    }

    /// Readers under a flush storm while the standby's postmaster is SIGKILLed: no read fails,
    /// reads move to the primary and `/readyz` shows the standby down; started again, it is `up`
    /// and answers misses again.
    @Test func killingTheStandbyUnderLoadFailsNoReadAndReadsComeBackWhenItReturns() throws {
        try withReadsOnAStandby { outage in
            kill(outage.standby.postmaster, SIGKILL)
            Thread.sleep(forTimeInterval: 3)
            let whileDown = try RowSources(port: outage.service.port) - outage.before
            let stateWhileDown = replicaStatus(outage.service)?["state"] as? String
            // Its children end when they notice the postmaster's death; one that lingers would keep
            // the standby from starting on its shared memory again.
            let lingering = waitForExit(outage.standby.children)
            try #require(
                try TestEnvironment.deps("start-standby", environment: ["PROFILE_PG_STANDBY_DELAY_MS": "0"]) == 0,
                "the standby did not start again")
            let (back, afterReturn, upsAgain) = try outage.comeBack()

            let tally = Readers.Tally([outage.readers])
            print(
                "replicas, standby SIGKILLed under load: \(tally); rows in the 3 s after the kill: \(whileDown), "
                    + "/readyz: \(stateWhileDown ?? "-"); \(outage.standby.children.count) children of the postmaster, "
                    + "\(lingering) still there 10 s after the kill; after the restart (until 2 s after it was back): "
                    + "\(afterReturn); the monitor found it up again \(upsAgain) times")
            #expect(tally.failures.isEmpty, "answers other than 200: \(tally.failures)")
            #expect(tally.unanswered == 0, "requests without an answer")
            #expect(whileDown.primary > 100, "reads moved to the primary")
            #expect(stateWhileDown != nil && stateWhileDown != "up", "/readyz shows the standby not up")
            #expect(back, "the standby is up again and answers misses within 30 s of its restart")
        }
    }

    /// The same with the standby frozen (SIGSTOP of the postmaster and every process it started)
    /// for 3 s, then continued: no read fails, only some wait; reads come back to the standby.
    @Test func freezingTheStandbyUnderLoadFailsNoRead() throws {
        try withReadsOnAStandby { outage in
            var frozen: [pid_t] = []
            defer { for pid in frozen { kill(pid, SIGCONT) } }
            let frozenAt = ContinuousClock.now
            for pid in [outage.standby.postmaster] + outage.standby.children {
                try TestEnvironment.freeze(pid)
                frozen.append(pid)
            }
            Thread.sleep(forTimeInterval: 3)
            let whileFrozen = try RowSources(port: outage.service.port) - outage.before
            let stateWhileFrozen = replicaStatus(outage.service)?["state"] as? String
            for pid in frozen { kill(pid, SIGCONT) }
            frozen = []
            let continuedAt = ContinuousClock.now
            let (back, _, upsAgain) = try outage.comeBack()

            let tally = Readers.Tally(outage.readers)
            let frozenLatency = outage.readers.latencies(between: frozenAt, and: continuedAt + .milliseconds(500))
            print(
                "replicas, standby frozen 3 s under load: \(tally); rows while frozen: \(whileFrozen), /readyz: "
                    + "\(stateWhileFrozen ?? "-"); latency of reads sent while frozen (and 0.5 s after): \(frozenLatency); "
                    + "the monitor found it up again \(upsAgain) times")
            #expect(tally.failures.isEmpty, "answers other than 200: \(tally.failures)")
            #expect(tally.unanswered == 0, "requests without an answer")
            #expect(whileFrozen.primary > 100, "reads moved to the primary")
            #expect(back, "the standby is up again and answers misses within 30 s of SIGCONT")
        }
    }

    /// An instance reading from a standby with no apply delay, 4 readers and a flush storm on it,
    /// running for a second before an outage of the standby that `body` makes.
    struct StandbyOutage {
        let service: ServiceProcess
        let readers: Readers
        let flusher: MemcachedFlusher
        let standby: (postmaster: pid_t, children: [pid_t])
        /// The instance's rows before the outage, and how often its monitor had found the standby up.
        let before: RowSources
        let upsBefore: Int
        let test: ReplicaEndToEndTests

        /// Waits (30 s at most) for the standby to be `up` and answer misses again, then two more
        /// checks of the monitor, and stops the load. Returns whether it came back, the rows read
        /// since it did, and how often the monitor found it up since the outage began.
        func comeBack() throws -> (back: Bool, rows: RowSources, upsAgain: Int) {
            let returned = try RowSources(port: service.port)
            let back = Eventually.wait(timeout: .seconds(30), interval: .milliseconds(50)) {
                test.replicaStatus(service)?["state"] as? String == "up"
                    && ((try? RowSources(port: service.port)).map { $0.standby > returned.standby } ?? false)
            }
            // Two more checks, so that the monitor's log shows whether the standby stayed up.
            Thread.sleep(forTimeInterval: 2)
            let rows = try RowSources(port: service.port) - returned
            let upsAgain = test.monitorFoundUp(service) - upsBefore
            readers.stop()
            flusher.stop()
            return (back, rows, upsAgain)
        }
    }

    private func withReadsOnAStandby(_ body: (StandbyOutage) throws -> Void) throws {
        try startStandby(applyDelayMS: 0)
        defer { stopStandby() }
        let (service, ids) = try readingService()
        defer { _ = service.terminate() }
        let flusher = MemcachedFlusher(every: .milliseconds(2))
        let readers = Readers(port: service.port, ids: ids, threads: 4)
        defer {
            readers.stop()
            flusher.stop()
        }
        Thread.sleep(forTimeInterval: 1)
        try body(
            StandbyOutage(
                service: service, readers: readers, flusher: flusher, standby: try standbyProcesses(),
                before: try RowSources(port: service.port), upsBefore: monitorFoundUp(service), test: self))
    }

    // MARK: - Servers

    private func startStandby(applyDelayMS: Int) throws {
        try #require(
            try TestEnvironment.deps("start-standby", environment: ["PROFILE_PG_STANDBY_DELAY_MS": "\(applyDelayMS)"]) == 0,
            "scripts/deps.sh start-standby failed (its messages are above; the standby's log is in the state folder's standby/postgres.log)")
    }

    private func stopStandby() {
        #expect((try? TestEnvironment.deps("stop-standby")) == 0, "scripts/deps.sh stop-standby failed")
    }

    /// The standby's postmaster (its `postmaster.pid`) and every process it started.
    private func standbyProcesses() throws -> (postmaster: pid_t, children: [pid_t]) {
        let path = "\(TestEnvironment.stateDirectory)/standby/data/postmaster.pid"
        let text = try #require(try? String(contentsOfFile: path, encoding: .utf8), "no \(path)")
        let postmaster = try #require(
            text.split(separator: "\n").first.flatMap { pid_t($0.trimmingCharacters(in: .whitespaces)) })
        var children: [pid_t] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry), let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let fields = stat.split(separator: ")").last?.split(separator: " "), fields.count > 2,
                pid_t(fields[1]) == postmaster
            else { continue }
            children.append(pid)
        }
        try #require(!children.isEmpty, "the standby's postmaster \(postmaster) has no children")
        return (postmaster, children)
    }

    /// Waits up to 10 s for `pids` to end, then SIGKILLs any left; returns how many were left.
    private func waitForExit(_ pids: [pid_t]) -> Int {
        _ = Eventually.wait(timeout: .seconds(10), interval: .milliseconds(50)) {
            pids.allSatisfy { kill($0, 0) != 0 }
        }
        let left = pids.filter { kill($0, 0) == 0 }
        for pid in left { kill(pid, SIGKILL) }
        return left.count
    }

    private func primary() throws -> PostgresConnection { try TestDatabase.primary() }

    private func insertProfiles(_ count: Int, on connection: PostgresConnection) throws -> [Int64] {
        try TestDatabase.insertProfiles(
            count, blocks: 2_000_000_000...3_000_000_000, usernamePrefix: "rp", namePrefix: "Replica", on: connection)
    }

    /// A standby with no apply delay, 500 profiles and an instance reading from it, the standby `up`.
    private func readingService() throws -> (ServiceProcess, [Int64]) {
        let connection = try primary()
        defer { connection.close() }
        let ids = try insertProfiles(500, on: connection)
        let service = try ServiceProcess(arguments: Self.replicaArguments())
        try requireStandbyUp(on: [service])
        return (service, ids)
    }

    /// Fails the test unless each instance finds the standby `up` within 30 s (a first check
    /// runs when it starts).
    private func requireStandbyUp(on instances: [ServiceProcess]) throws {
        for instance in instances {
            try #require(
                Eventually.wait(timeout: .seconds(30), interval: .milliseconds(50)) {
                    replicaStatus(instance)?["state"] as? String == "up"
                }, "the standby is up for :\(instance.port): \(replicaStatus(instance) ?? [:])")
        }
    }

    /// The standby as `/readyz` reports it.
    func replicaStatus(_ instance: ServiceProcess) -> [String: Any]? {
        ((try? Curl.request("\(instance.baseURL)/readyz"))?.json?["replicas"] as? [[String: Any]])?.first
    }

    /// How often the instance's replica monitor logged that it found the standby `up` after
    /// another state: more than once after an outage means a read marked it out again between two
    /// checks.
    func monitorFoundUp(_ instance: ServiceProcess) -> Int {
        instance.log.split(separator: "\n")
            .filter { $0.contains("msg=\"replica state changed\"") && $0.contains("state=up") }.count
    }

    private func feedState(_ instance: ServiceProcess) -> String? {
        ((try? Curl.request("\(instance.baseURL)/readyz"))?.json?["change_feed"] as? [String: Any])?["state"] as? String
    }

    // MARK: - What the cache and the instances hold

    private func rowVersions(_ ids: [Int64], on connection: PostgresConnection) throws -> [Int64: Int] {
        let result = try connection.simpleQuery(
            "SELECT id, version FROM user_profiles WHERE id BETWEEN \(ids.min()!) AND \(ids.max()!)")
        var versions: [Int64: Int] = [:]
        for row in result.rows { versions[try row.decode("id")] = Int(try row.decode("version", as: Int32.self)) }
        return versions
    }

    /// Every way `ids` disagree with their rows: a memcached entry at another version (a record of
    /// absence counts as 0; no entry and a lease prove nothing stale), checked before and after
    /// the instances are read, since their reads populate; a version an instance serves.
    private func staleness(of ids: [Int64], servedBy instances: [ServiceProcess], on connection: PostgresConnection)
        throws -> [String]
    {
        let rows = try rowVersions(ids, on: connection)
        let cache = try MemcachedConnection(
            configuration: MemcachedConfiguration(servers: TestEnvironment.memcachedServerList), logger: Self.logger)
        defer { cache.close() }
        func cacheDisagreements(_ moment: String) -> [String] {
            ids.compactMap { id in
                guard case .hit(let item) = cache.get(ProfileCacheEntries.key(for: id)) else { return nil }
                let cached =
                    ProfileCacheEntries.isAbsent(item.value) ? 0 : ProfileCacheEntries.version(of: item.value).map(Int.init)
                guard let cached, cached != rows[id] else { return nil }
                return "\(id): memcached \(cached), row \(rows[id] ?? 0) (\(moment))"
            }
        }
        var stale = cacheDisagreements("left by the load")
        for instance in instances {
            let client = try HTTPTestClient(port: instance.port)
            for id in ids {
                try client.send("GET /users/profile/\(id) HTTP/1.1\r\nHost: t\r\n\r\n")
                let response = try client.readResponse()
                let served = response.status == 200 ? Readers.version(response) : 0
                if served != rows[id] { stale.append("\(id): :\(instance.port) served \(served ?? -1), row \(rows[id] ?? 0)") }
            }
        }
        return stale + cacheDisagreements("after the instances' reads")
    }
}

// MARK: - Load

extension ReplicaEndToEndTests {
    /// Threads GETting random profiles of `ids` through one instance until ``stop()``, each on a
    /// connection of its own (a new one after a failure: the instance may be killed and started
    /// again). Every answer's status is counted. Each thread keeps the highest version it saw per
    /// id and records an older answer after it (monotonic reads) and any 404 (no profile here is
    /// deleted); with `floors`, each GET carries `min_version` = the id's floor at the time it is
    /// sent, and an answer below it is recorded.
    final class Readers: Sendable {
        struct Sample: Sendable {
            var sent: ContinuousClock.Instant
            var seconds: Double
        }

        private struct Record: Sendable {
            var statuses: [Int: Int] = [:]
            var unanswered = 0
            var wentBack: [String] = []
            var belowFloor: [String] = []
            var samples: [Sample] = []
        }

        private let records = Mutex<[Record]>([])
        private let running = Atomic<Bool>(true)
        private let threads = Mutex<[TestThread]>([])
        let withFloors: Bool

        init(port: Int, ids: [Int64], threads count: Int, floors: (@Sendable (Int64) -> Int)? = nil) {
            withFloors = floors != nil
            let started = (0..<count).map { _ in
                TestThread { [self] in
                    let record = read(port: port, ids: ids, floors: floors)
                    records.withLock { $0.append(record) }
                }
            }
            threads.withLock { $0 = started }
        }

        /// Stops the threads and waits for them (again: nothing).
        func stop() {
            running.store(false, ordering: .relaxed)
            threads.withLock { threads in
                threads.forEach { $0.join() }
                threads = []
            }
        }

        /// The version an answer names in its `ETag` (`"N"`).
        static func version(_ response: HTTPTestClient.Response) -> Int? {
            response.header("ETag").flatMap { Int($0.trimmingCharacters(in: CharacterSet(charactersIn: "\""))) }
        }

        private func read(port: Int, ids: [Int64], floors: (@Sendable (Int64) -> Int)?) -> Record {
            var record = Record()
            var highest: [Int64: Int] = [:]
            var client: HTTPTestClient?
            while running.load(ordering: .relaxed) {
                guard let connected = client ?? (try? HTTPTestClient(port: port)) else {
                    record.unanswered += 1
                    usleep(10_000)
                    continue
                }
                client = connected
                let id = ids.randomElement()!
                let floor = floors?(id)
                let path = floor.map { "/users/profile/\(id)?min_version=\($0)" } ?? "/users/profile/\(id)"
                let sent = ContinuousClock.now
                guard (try? connected.send("GET \(path) HTTP/1.1\r\nHost: t\r\n\r\n")) != nil,
                    let response = try? connected.readResponse()
                else {
                    record.unanswered += 1
                    client = nil
                    continue
                }
                let elapsed = sent.duration(to: .now)
                record.samples.append(Sample(sent: sent, seconds: elapsed / .seconds(1)))
                record.statuses[response.status, default: 0] += 1
                guard response.status == 200, let version = Self.version(response) else {
                    if response.status == 404 { record.wentBack.append("\(id): 404 (floor \(floor.map(String.init) ?? "none"))") }
                    continue
                }
                if let last = highest[id], version < last { record.wentBack.append("\(id): \(version) after \(last)") }
                if let floor, version < floor { record.belowFloor.append("\(id): \(version) < floor \(floor)") }
                highest[id] = max(highest[id] ?? 0, version)
            }
            return record
        }

        /// p50, p99 and max of the reads sent between two instants.
        func latencies(between start: ContinuousClock.Instant, and end: ContinuousClock.Instant) -> String {
            let seconds = records.withLock { $0.flatMap(\.samples) }
                .filter { $0.sent >= start && $0.sent < end }.map(\.seconds).sorted()
            guard !seconds.isEmpty else { return "no reads" }
            func ms(_ value: Double) -> String { String(format: "%.1f ms", value * 1000) }
            return "p50 \(ms(seconds[seconds.count / 2])), p99 \(ms(seconds[seconds.count * 99 / 100])), "
                + "max \(ms(seconds.last!)) (n=\(seconds.count))"
        }

        /// What a group of readers saw, once stopped.
        struct Tally: CustomStringConvertible {
            var answers = 0
            var statuses: [Int: Int] = [:]
            var unanswered = 0
            var wentBack: [String] = []
            var belowFloor: [String] = []
            var floorReads = 0
            var latencies: [Double] = []

            init(_ readers: [Readers]) {
                for reader in readers {
                    for record in reader.records.withLock({ $0 }) {
                        let answered = record.statuses.values.reduce(0, +)
                        answers += answered
                        if reader.withFloors { floorReads += answered }
                        statuses.merge(record.statuses, uniquingKeysWith: +)
                        unanswered += record.unanswered
                        wentBack += record.wentBack
                        belowFloor += record.belowFloor
                        latencies += record.samples.map(\.seconds)
                    }
                }
                latencies.sort()
            }

            init(_ reader: Readers) { self.init([reader]) }

            /// Answers other than 200, by status.
            var failures: [Int: Int] { statuses.filter { $0.key != 200 } }

            var description: String {
                let p99 = latencies.isEmpty ? 0 : latencies[latencies.count * 99 / 100] * 1000
                return "\(answers) reads (\(floorReads) with min_version), statuses \(statuses.sorted { $0.key < $1.key }), "
                    + "\(unanswered) unanswered, \(wentBack.count) went back, \(belowFloor.count) below floor, "
                    + String(format: "p99 %.1f ms, max %.1f ms", p99, (latencies.last ?? 0) * 1000)
            }
        }
    }

    /// Pauses a ``WriteLoad``'s writers every other 0.8 s until ``stop()``.
    final class QuietSpells: Sendable {
        private let running = Atomic<Bool>(true)
        private let thread = Mutex<TestThread?>(nil)

        init(load: WriteLoad) {
            thread.withLock {
                $0 = TestThread { [self] in
                    while running.load(ordering: .relaxed) {
                        Thread.sleep(forTimeInterval: 0.8)
                        load.paused.store(true, ordering: .relaxed)
                        Thread.sleep(forTimeInterval: 0.8)
                        load.paused.store(false, ordering: .relaxed)
                    }
                }
            }
        }

        func stop() {
            guard running.exchange(false, ordering: .relaxed) else { return }
            thread.withLock { $0 }?.join()
        }
    }

    /// Where an instance's reads of rows went, from its `/metrics` (`profile_service_cache_events_total`).
    struct RowSources: CustomStringConvertible {
        var standby = 0
        var primary = 0
        /// The standby had not replayed the read's position (after the catch-up wait).
        var behind = 0
        var belowFloor = 0
        var unavailable = 0
        /// Samples of the primary's WAL position taken for them.
        var positions = 0

        init(port: Int) throws {
            let client = try HTTPTestClient(port: port)
            try client.send("GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
            let metrics = PrometheusText(try client.readResponse().bodyText)
            func events(_ event: String) -> Int { Int(metrics.value("profile_service_cache_events_total", ["event": event]) ?? 0) }
            standby = events("standby_read")
            primary = events("database_read")
            behind = events("standby_behind")
            belowFloor = events("standby_below_floor")
            unavailable = events("standby_unavailable")
            positions = events("primary_position")
        }

        private init() {}

        static func - (after: RowSources, before: RowSources) -> RowSources {
            var difference = RowSources()
            difference.standby = after.standby - before.standby
            difference.primary = after.primary - before.primary
            difference.behind = after.behind - before.behind
            difference.belowFloor = after.belowFloor - before.belowFloor
            difference.unavailable = after.unavailable - before.unavailable
            difference.positions = after.positions - before.positions
            return difference
        }

        /// standby / (standby + primary).
        var standbyShare: Double { standby + primary == 0 ? 0 : Double(standby) / Double(standby + primary) }

        var description: String {
            "standby_read \(standby), database_read \(primary), standby_behind \(behind), "
                + "standby_below_floor \(belowFloor), standby_unavailable \(unavailable), primary_position \(positions)"
        }
    }
}
