import Foundation
import MemcachedClient
import Testing
import TestSupport

@testable import ProfileService

/// The service measures its own consistency (issue 21; docs/design.md §3.8).
@Suite struct ConsistencyVerdictTests {
    typealias Verdict = ConsistencyVerdict

    @Test func memcachedAloneClearsWhatIsNotOlder() {
        #expect(Verdict.judge(change: 5, cached: .nothing) == .consistent, "nothing served")
        #expect(Verdict.judge(change: 5, cached: .profile(version: 5)) == .consistent)
        #expect(Verdict.judge(change: 5, cached: .profile(version: 7)) == .consistent, "newer than the change")
        #expect(Verdict.judge(change: 5, cached: .unreachable) == .inconclusive)
        #expect(Verdict.judge(change: 5, cached: .profile(version: 4)) == nil, "older: a suspect")
        #expect(Verdict.judge(change: 5, cached: .absent) == nil, "a record of absence after an insert: a suspect")
        #expect(Verdict.judge(change: 0, cached: .absent) == .consistent, "absent after a delete")
        #expect(Verdict.confirm(cachedVersion: 0, stored: .absent) == .consistent)
        #expect(Verdict.confirm(cachedVersion: 0, stored: .row(version: 1)) == .violation)
        #expect(Verdict.judge(change: 0, cached: .profile(version: 4)) == nil, "a deleted row's profile: a suspect")
        #expect(Verdict.judge(change: 0, cached: .nothing) == .consistent)
    }

    @Test func aSuspectCountsOnlyWhenPostgreSQLConfirmsIt() {
        #expect(Verdict.confirm(cachedVersion: 4, stored: .row(version: 5)) == .violation)
        #expect(Verdict.confirm(cachedVersion: 4, stored: .absent) == .violation, "served after its row was deleted")
        #expect(Verdict.confirm(cachedVersion: 4, stored: .row(version: 4)) == .consistent, "the row is what is cached")
        #expect(Verdict.confirm(cachedVersion: 4, stored: .unreachable) == .inconclusive)
    }

    @Test func aProfileOfAGoneRowIsLookedAtOnceMoreBeforeItCounts() {
        #expect(Verdict.confirmsAtOnce(.row(version: 5)), "older than a row that is there: stale since the sampled change")
        #expect(!Verdict.confirmsAtOnce(.absent), "the deletion may have committed an instant ago")
    }
}
