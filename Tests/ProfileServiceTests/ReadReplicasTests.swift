import PostgresClient
import ProfileService
import Testing

/// The state a check of a standby implies (docs/design.md §8), and the floor rule.
@Suite struct ReadReplicasTests {
    static let primary = ReadReplicas.PrimarySample(systemIdentifier: "7712", position: LSN(rawValue: 10_000))

    static func judge(_ check: ReadReplicas.Check, primary: ReadReplicas.PrimarySample = primary) -> ReadReplicas.State {
        ReadReplicas.state(of: check, primary: primary, maximumLag: .seconds(5), maximumLagBytes: 1_000).state
    }

    static func check(replayed: UInt64?, age: Double? = 0.1, system: String = "7712", inRecovery: Bool = true)
        -> ReadReplicas.Check
    {
        ReadReplicas.Check(
            systemIdentifier: system, inRecovery: inRecovery, replayed: replayed.map(LSN.init(rawValue:)), replayAge: age)
    }

    @Test func aStandbyWithinTheBoundsIsUp() {
        #expect(Self.judge(Self.check(replayed: 10_000)) == .up)
        #expect(Self.judge(Self.check(replayed: 9_500, age: 4)) == .up)
    }

    @Test func aCaughtUpStandbyHasNoLagHoweverOldItsLastCommit() {
        let judged = ReadReplicas.state(
            of: Self.check(replayed: 10_000, age: 3_600), primary: Self.primary, maximumLag: .seconds(5), maximumLagBytes: 1_000)
        #expect(judged.state == .up)
        #expect(judged.lagSeconds == 0)
        #expect(judged.lagBytes == 0)
    }

    @Test func aStandbyBeyondEitherBoundIsLagging() {
        #expect(Self.judge(Self.check(replayed: 8_000)) == .lagging, "2,000 bytes behind, bound 1,000")
        #expect(Self.judge(Self.check(replayed: 9_900, age: 6)) == .lagging, "6 s behind, bound 5 s")
    }

    @Test func onlyAStandbyOfThisPrimaryCountsAndOnlyWhileItsCommitsAreFlushedFirst() {
        #expect(Self.judge(Self.check(replayed: 10_000, system: "42")) == .notStandby, "another cluster")
        #expect(Self.judge(Self.check(replayed: nil, inRecovery: false)) == .notStandby, "promoted")
        let asynchronous = ReadReplicas.PrimarySample(systemIdentifier: "7712", position: LSN(rawValue: 10_000), flushesCommits: false)
        #expect(Self.judge(Self.check(replayed: 10_000), primary: asynchronous) == .unprovable)
    }

    @Test func theFloorRule() {
        let row = Profile(id: 1, username: "a", displayName: "A", version: 3, updatedAt: "2026-01-01T00:00:00.000000Z")
        #expect(StandbyFloorRule.accepts(row, floor: nil))
        #expect(StandbyFloorRule.accepts(nil, floor: nil), "an absence answers a read without a floor")
        #expect(StandbyFloorRule.accepts(row, floor: 3))
        #expect(!StandbyFloorRule.accepts(row, floor: 4))
        #expect(!StandbyFloorRule.accepts(nil, floor: 1), "never a 404 for a version the client holds")
    }
}
