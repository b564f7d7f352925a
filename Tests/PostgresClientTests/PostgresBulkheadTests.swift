import Dispatch
import Foundation
import PostgresClient
import Testing

@testable import PostgresClient

/// The bulkhead's rule without a server (docs/design.md §5.3): wait for a place while statements
/// finish, refuse at once when none has finished for `stallAfter`.
@Suite struct PostgresBulkheadTests {
    @Test func aStatementWaitsForAPlaceWhileOthersFinish() {
        let bulkhead = PostgresBulkhead(limit: 2, stallAfter: .seconds(2))
        #expect(bulkhead.enter())
        #expect(bulkhead.enter())
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { bulkhead.leave() }
        #expect(bulkhead.enter(), "a place freed while it waited")
        #expect(bulkhead.refused == 0)
    }

    @Test func aStatementIsRefusedAtOnceWhenNothingFinishesForStallAfter() {
        let bulkhead = PostgresBulkhead(limit: 1, stallAfter: .milliseconds(50))
        #expect(bulkhead.enter())
        let clock = ContinuousClock()
        let first = clock.measure { #expect(!bulkhead.enter(), "no place freed within stallAfter") }
        #expect(first < .seconds(1))
        // Still stalled: the next one is refused without waiting.
        let second = clock.measure { #expect(!bulkhead.enter()) }
        #expect(second < first, "refused at once, not after another wait")
        #expect(bulkhead.refused == 2)
        bulkhead.leave()
        #expect(bulkhead.enter(), "a place again once the statement finished")
    }

    /// After a quiet spell nothing has finished for long; the burst that follows fills every
    /// place at once, and the next statement waits for one to finish rather than being refused
    /// (a service that had been idle answered its first burst of misses with 503s).
    @Test func aBurstAfterAQuietSpellWaitsForAPlace() {
        // stallAfter far above the 20 ms the statement takes, so that a busy machine (the unit
        // targets run in parallel) that schedules the leaving thread late cannot make it a stall.
        let bulkhead = PostgresBulkhead(limit: 1, stallAfter: .milliseconds(500))
        Thread.sleep(forTimeInterval: 1.1)  // quiet: no statement for twice stallAfter
        #expect(bulkhead.enter())
        // A thread of its own: Dispatch's global queue also runs the tests, whose threads block here.
        Thread { Thread.sleep(forTimeInterval: 0.02); bulkhead.leave() }.start()
        #expect(bulkhead.enter(), "the server answers within stallAfter: wait, do not refuse")
        #expect(bulkhead.refused == 0)
    }
}
