import Testing

@testable import PostgresClient

/// The shared health's decisions, on explicit instants (no server).
@Suite struct PostgresServerHealthTests {
    private let start = ContinuousClock.now

    @Test func upConnectsWithoutALock() {
        let health = PostgresServerHealth()
        #expect(!health.isDown)
        #expect(health.admitConnect(at: start) == .connect)
    }

    @Test func downFailsFastThenLetsExactlyOneProbeThrough() {
        let health = PostgresServerHealth(initialDelay: .milliseconds(50), maximumDelay: .milliseconds(200))
        #expect(health.recordConnectFailure(at: start, reason: "refused") == .milliseconds(50))
        #expect(health.isDown)
        #expect(health.admitConnect(at: start + .milliseconds(49)) == .failFast)
        // Backoff over: one probe; the other callers keep failing fast while it runs.
        let admissions = (0..<16).map { _ in health.admitConnect(at: start + .milliseconds(50)) }
        #expect(admissions.filter { $0 == .probe }.count == 1)
        #expect(admissions.filter { $0 == .failFast }.count == 15)
        // The probe failed: the next period doubles, capped at the maximum.
        #expect(health.recordConnectFailure(at: start + .milliseconds(60), reason: "refused") == .milliseconds(100))
        #expect(health.recordConnectFailure(at: start + .milliseconds(60), reason: "refused") == .milliseconds(200))
        #expect(health.recordConnectFailure(at: start + .milliseconds(60), reason: "refused") == .milliseconds(200))
        #expect(health.admitConnect(at: start + .milliseconds(259)) == .failFast)
        #expect(health.admitConnect(at: start + .milliseconds(260)) == .probe)
    }

    @Test func oneSuccessfulConnectLetsEveryConnectionConnect() {
        let health = PostgresServerHealth()
        health.recordConnectFailure(at: start, reason: "refused")
        #expect(health.admitConnect(at: start + .seconds(1)) == .probe)
        health.recordConnected()
        #expect(!health.isDown)
        for _ in 0..<16 { #expect(health.admitConnect(at: start + .seconds(1)) == .connect) }
        // A later outage starts again from the initial delay.
        #expect(health.recordConnectFailure(at: start + .seconds(2), reason: "refused") == health.initialDelay)
    }

    @Test func aProbeThatNeverReportsIsReplacedAfterItsTimeout() {
        let health = PostgresServerHealth(probeTimeout: .seconds(5))
        health.recordConnectFailure(at: start, reason: "refused")
        #expect(health.admitConnect(at: start + .seconds(1)) == .probe)
        #expect(health.admitConnect(at: start + .seconds(5)) == .failFast)
        #expect(health.admitConnect(at: start + .seconds(6)) == .probe)
    }

    @Test func theReasonOfTheLastFailedConnectIsKeptWhileDown() {
        let health = PostgresServerHealth()
        #expect(health.downReason == nil)
        health.recordConnectFailure(at: start, reason: "Connection refused")
        health.recordConnectFailure(at: start, reason: "password authentication failed for user \"app\"")
        #expect(health.downReason == "password authentication failed for user \"app\"")
        health.recordConnected()
        #expect(health.downReason == nil)
    }

    @Test func aReadGivesUpOnlyWhenNoConnectionHasHeardFromTheServerForTheSilenceLimit() {
        let health = PostgresServerHealth(silenceLimit: .milliseconds(100))
        let sent = ContinuousClock.now
        health.recordAnswer(at: sent)
        #expect(!health.isSilent(toStatementSentAt: sent, at: sent + .milliseconds(50)), "not waited long enough")
        #expect(health.isSilent(toStatementSentAt: sent, at: sent + .milliseconds(150)), "nobody heard anything")
        // Another connection heard from the server meanwhile: slow for this read, not silent.
        health.recordAnswer(at: sent + .milliseconds(120))
        #expect(!health.isSilent(toStatementSentAt: sent, at: sent + .milliseconds(150)))
        #expect(health.isSilent(toStatementSentAt: sent, at: sent + .milliseconds(230)))
    }
}
