import Foundation
import Logging
import MemcachedClient
import PostgresClient
import ProfileServiceTesting
import ServiceRuntime
import Testing
import TestSupport

@testable import ProfileService

/// Misses read from the real streaming standby of `scripts/deps.sh start-standby`, applying every
/// commit 300 ms late (docs/design.md §8): the proof with real replay positions, the identity
/// check, the monitor's states. Started by the suite and stopped at its end; a standby that cannot
/// start fails the test, nothing is skipped.
@Suite(.serialized, .requires(.postgres, .memcached)) struct StandbyReadIntegrationTests {
    static let applyDelayMS = 300
    static var standbyPort: Int { Int(TestEnvironment.variable("PROFILE_PG_STANDBY_PORT") ?? "") ?? 55442 }
    static var standbyURL: String { "postgres://postgres@127.0.0.1:\(standbyPort)/profiles" }

    /// The standby's reads for this thread, checked by a running monitor.
    struct Replicas {
        let replicas: ReadReplicas
        let monitor: ReplicaMonitor
        let reader: PostgresStandbyReader

        init(url: String) throws {
            var configuration = try PostgresConfiguration(url: url, statementTimeout: .milliseconds(500))
            configuration.responseDeadline = .milliseconds(750)
            var settings = ReadReplicas.Configuration(standbys: [configuration])
            settings.checkInterval = .milliseconds(100)
            replicas = ReadReplicas(configuration: settings)
            monitor = ReplicaMonitor(
                replicas: replicas, primary: try PostgresConfiguration(url: TestEnvironment.databaseURL),
                logger: IntegrationBackends.logger)
            reader = PostgresStandbyReader(replicas: replicas, first: 0, logger: IntegrationBackends.logger)
            monitor.start()
        }

        var state: ReadReplicas.State { replicas.statuses[0].state }

        func stop() {
            reader.close()
            monitor.stop()
        }
    }

    /// A repository over the real servers that reads misses from the standby.
    private static func repository(_ backends: IntegrationBackends, _ replicas: Replicas) -> (ProfileCacheShared, ProfileRepository) {
        let shared = ProfileCacheShared()
        let repository = ProfileRepository(
            store: backends.store, cache: backends.cache, shared: shared, logger: IntegrationBackends.logger,
            standby: replicas.reader)
        return (shared, repository)
    }

    /// Starts the standby 300 ms late, runs `body` with a repository reading from it once the
    /// monitor finds it up, and stops it.
    private func withLateStandby(
        _ body: (IntegrationBackends, Replicas, ProfileCacheShared, ProfileRepository) throws -> Void
    ) throws {
        try startStandby()
        defer { #expect((try? TestEnvironment.deps("stop-standby")) == 0) }
        let backends = try IntegrationBackends()
        let replicas = try Replicas(url: Self.standbyURL)
        defer { replicas.stop() }
        let (shared, repository) = Self.repository(backends, replicas)
        try #require(Eventually.wait(timeout: .seconds(10)) { replicas.state == .up }, "the monitor found the standby up")
        try body(backends, replicas, shared, repository)
    }

    private func startStandby() throws {
        try #require(
            try TestEnvironment.deps("start-standby", environment: ["PROFILE_PG_STANDBY_DELAY_MS": "\(Self.applyDelayMS)"]) == 0,
            "scripts/deps.sh start-standby failed (its messages are above)")
    }

    /// Version 2 written through and evicted while the standby still shows version 1: the read
    /// answers 2 from the primary and leaves 2 in memcached; once the standby has replayed it, the
    /// next miss is the standby's.
    @Test func aLateStandbyNeverPopulatesAnOlderVersionAndServesOnceItHasReplayed() throws {
        try withLateStandby { backends, replicas, shared, repository in try lateStandbyRounds(backends, shared, repository) }
    }

    private func lateStandbyRounds(
        _ backends: IntegrationBackends, _ shared: ProfileCacheShared, _ repository: ProfileRepository
    ) throws {

        let profile = try backends.seed()
        var rounds = 0
        var conclusive = 0
        // A round is conclusive when the read came within the apply delay of the commit: a slow
        // machine proves nothing and the round is tried again, never failed for its timing.
        while conclusive < 3, rounds < 20 {
            rounds += 1
            let current = try #require(try backends.store.profile(id: profile.id))
            let written = ContinuousClock.now
            guard case .updated(let updated) = try repository.updateDisplayName(
                id: profile.id, to: "Round \(rounds)", expectedVersion: current.version)
            else { Issue.record("the update did not apply"); return }
            _ = backends.cache.delete(shared.configuration.key(for: profile.id))
            let behindBefore = shared.statistics.count(.standbyBehind)
            let answer = try repository.read(id: profile.id)
            let elapsed = written.duration(to: .now)
            #expect(answer?.version == updated.version, "never older than the version written through")
            #expect(backends.cachedVersion(profile.id, shared: shared) == updated.version, "no older version populated")
            if elapsed < .milliseconds(Self.applyDelayMS - 50) {
                conclusive += 1
                #expect(shared.statistics.count(.standbyBehind) > behindBefore, "the late standby could not prove the position")
            }
        }
        #expect(conclusive == 3, "\(conclusive) conclusive rounds of \(rounds)")

        // Replayed: the standby answers the miss.
        let last = try #require(try backends.store.profile(id: profile.id))
        let servedBefore = shared.statistics.count(.standbyRead)
        #expect(
            Eventually.wait(timeout: .seconds(10), interval: .milliseconds(50)) {
                _ = backends.cache.delete(shared.configuration.key(for: profile.id))
                return (try? repository.read(id: profile.id))??.version == last.version
                    && shared.statistics.count(.standbyRead) > servedBefore
            }, "a miss after the apply delay is read from the standby")
    }

    /// The primary's own URL given as a standby: it is not in recovery, so it is never read.
    @Test func aServerThatIsNotAStandbyIsNeverRead() throws {
        let backends = try IntegrationBackends()
        let replicas = try Replicas(url: TestEnvironment.databaseURL)
        defer { replicas.stop() }
        #expect(Eventually.wait(timeout: .seconds(10)) { replicas.state == .notStandby }, "state \(replicas.state)")
        let (shared, repository) = Self.repository(backends, replicas)
        let profile = try backends.seed()
        #expect(try repository.read(id: profile.id)?.version == 1)
        #expect(shared.statistics.count(.standbyRead) == 0)
        #expect(shared.statistics.count(.databaseRead) == 1)
        #expect(replicas.replicas.statuses[0].detail?.contains("not in recovery") == true)
    }

    /// The standby stopped: reads go to the primary without an error, the standby is marked
    /// unreachable; started again, the monitor brings it back and it serves again.
    @Test func aStandbyThatGoesAwayCostsNoReadAnErrorAndComesBack() throws {
        try withLateStandby { backends, replicas, shared, repository in
            try goesAwayAndComesBack(backends, replicas, shared, repository)
        }
    }

    private func goesAwayAndComesBack(
        _ backends: IntegrationBackends, _ replicas: Replicas, _ shared: ProfileCacheShared, _ repository: ProfileRepository
    ) throws {
        let profile = try backends.seed()
        func missRead() throws -> Int32? {
            _ = backends.cache.delete(shared.configuration.key(for: profile.id))
            return try repository.read(id: profile.id)?.version
        }
        #expect(Eventually.wait(timeout: .seconds(10), interval: .milliseconds(50)) {
            _ = try? missRead()
            return shared.statistics.count(.standbyRead) > 0
        }, "served by the standby once it has the row")

        try #require(try TestEnvironment.deps("stop-standby") == 0)
        for _ in 0..<20 { #expect(try missRead() == 1, "answered by the primary") }
        #expect(replicas.state == .unreachable)

        try startStandby()
        #expect(Eventually.wait(timeout: .seconds(20)) { replicas.state == .up }, "state \(replicas.state)")
        let servedBefore = shared.statistics.count(.standbyRead)
        #expect(Eventually.wait(timeout: .seconds(10), interval: .milliseconds(50)) {
            _ = try? missRead()
            return shared.statistics.count(.standbyRead) > servedBefore
        }, "served by the standby again")
    }
}
