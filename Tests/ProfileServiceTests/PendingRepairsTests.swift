import MemcachedClient
import PostgresClient
import Testing

@testable import ProfileService

/// What the feed may confirm while something has not landed (docs/design.md §3.3): pure logic.
@Suite struct PendingRepairsTests {
    let node = MemcachedServer(host: "127.0.0.1", port: 21211)

    @Test func aHeldFlushHoldsThePositionBackUntilItLands() {
        var pending = PendingRepairs()
        #expect(pending.holdsBack == nil)
        pending.holdFlush(of: node, confirmedBefore: LSN(rawValue: 100))
        pending.holdFlush(of: node, confirmedBefore: LSN(rawValue: 200))
        #expect(pending.holdsBack == LSN(rawValue: 100), "the earliest flush that did not land")
        #expect(pending.count == 1)
        pending.releaseFlush(of: node)
        #expect(pending.holdsBack == nil)
        #expect(pending.isEmpty)
    }

    @Test func anUnsentAnnouncementHoldsThePositionBackUntilItIsTaken() {
        var pending = PendingRepairs()
        let change = ProfileChange.changed(id: 7, version: 3, row: nil)
        pending.holdAnnouncement([change], confirmedBefore: LSN(rawValue: 50))
        pending.hold(.deleted(id: 8), confirmedBefore: LSN(rawValue: 80))
        #expect(pending.holdsBack == LSN(rawValue: 50))
        #expect(pending.announcementsHoldBack == LSN(rawValue: 50))
        let taken = pending.takeAnnouncements()
        #expect(taken == [change])
        #expect(pending.holdsBack == LSN(rawValue: 80), "the row repair still holds")
        #expect(pending.announcementsHoldBack == nil)
    }

    @Test func aRefusalRepeatedAtOnePositionIsAGapAndOneElsewhereStartsAgain() {
        var refusals = RepeatedRefusals()
        let outcomes = [10, 10, 20, 20, 20].map { refusals.record(at: LSN(rawValue: $0)) }
        #expect(outcomes == [false, false, false, false, true], "the position moved at the third: a new count")
    }

    @Test func onlyAnAnswerOfTheServerIsARefusal() {
        #expect(PostgresError(kind: .other, sqlState: "42704", message: "publication does not exist").isRefusal)
        #expect(!PostgresError(kind: .connectionUnavailable, sqlState: "08006", message: "lost").isRefusal)
        #expect(!PostgresError(kind: .connectionUnavailable, sqlState: "57P01", message: "admin shutdown").isRefusal)
        #expect(!PostgresError(kind: .other, sqlState: "55006", message: "slot in use").isRefusal)
        #expect(!PostgresError(kind: .connectionUnavailable, message: "no SQLSTATE").isRefusal)
    }
}

/// Noticing that another database is behind the same address (docs/design.md §3.7): pure logic.
@Suite struct DatabaseWatchTests {
    typealias Identity = LogicalReplicationSetup.DatabaseIdentity

    @Test func theSameDatabaseGoingForwardIsNoChange() {
        var watch = DatabaseWatch()
        #expect(watch.observe(Identity(systemIdentifier: "1", timeline: 1, position: LSN(rawValue: 100)), seen: .zero) == nil)
        #expect(watch.observe(Identity(systemIdentifier: "1", timeline: 1, position: LSN(rawValue: 500)), seen: LSN(rawValue: 400)) == nil)
    }

    @Test func aRestoreToAnEarlierPointIsNoticedFromThePositionsSeen() {
        var watch = DatabaseWatch()
        _ = watch.observe(Identity(systemIdentifier: "1", timeline: 1, position: LSN(rawValue: 100)), seen: .zero)
        // The stream saw the server at 900; the database at the address now stands at 300.
        let gap = watch.observe(
            Identity(systemIdentifier: "1", timeline: 1, position: LSN(rawValue: 300), observedAt: "later"), seen: LSN(rawValue: 900))
        #expect(gap?.description.contains("restored") == true)
        if case .databaseReplaced(_, let lastSeenAlive)? = gap {
            #expect(lastSeenAlive == "", "when this instance last saw the old database (the first observation)")
        } else {
            Issue.record("not a database replacement: \(String(describing: gap))")
        }
        // Once noticed, the restored database is the known one: going forward from it is fine.
        #expect(watch.observe(Identity(systemIdentifier: "1", timeline: 1, position: LSN(rawValue: 350)), seen: .zero) == nil)
    }

    @Test func aNewTimelineOrAnotherClusterIsNoticed() {
        var watch = DatabaseWatch()
        _ = watch.observe(Identity(systemIdentifier: "1", timeline: 1, position: LSN(rawValue: 100)), seen: .zero)
        #expect(watch.observe(Identity(systemIdentifier: "1", timeline: 2, position: LSN(rawValue: 200)), seen: .zero)?.description.contains("timeline") == true)
        #expect(watch.observe(Identity(systemIdentifier: "9", timeline: 2, position: LSN(rawValue: 300)), seen: .zero)?.description.contains("another cluster") == true)
    }
}
