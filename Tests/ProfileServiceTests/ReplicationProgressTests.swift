import PostgresClient
import Testing

@testable import ProfileService

/// The change feed's confirm rule (docs/design.md §3.3) as a table: what the stream and the
/// repairs did, and the position that may be confirmed after it. No server.
@Suite struct ReplicationProgressTests {
    static func lsn(_ value: UInt64) -> LSN { LSN(rawValue: value) }

    enum Event {
        case walData(UInt64)
        case begin, commit
        case keepalive(UInt64, waiting: Bool = false, held: Bool = false)
        case applied(UInt64)
    }

    static func run(_ events: [Event]) -> ReplicationProgress {
        var progress = ReplicationProgress()
        for event in events {
            switch event {
            case .walData(let end): progress.received(walEnd: lsn(end))
            case .begin: progress.transactionBegan()
            case .commit: progress.transactionCommitted()
            case .keepalive(let end, let waiting, let held):
                progress.keepalive(walEnd: lsn(end), transactionsWaiting: waiting, repairsHeld: held)
            case .applied(let end): progress.appliedTransactions(through: lsn(end))
            }
        }
        return progress
    }

    @Test(arguments: [
        // A quiet stream: a keepalive moves the position up to it (other tables' WAL is not kept).
        ([Event.keepalive(100)], nil as UInt64?, UInt64(100)),
        // A transaction under way: the keepalive must not move past it.
        ([.walData(50), .begin, .keepalive(100)], nil, 0),
        // Committed but not yet applied (waiting in a batch): the same.
        ([.walData(60), .begin, .commit, .keepalive(100, waiting: true)], nil, 0),
        // Applied: up to its end; a later keepalive with nothing waiting goes further.
        ([.begin, .commit, .applied(60)], nil, 60),
        ([.begin, .commit, .applied(60), .keepalive(100)], nil, 100),
        // A repair held: never past it, even after a keepalive.
        ([.begin, .commit, .applied(60), .keepalive(100, held: true)], 40, 40),
        ([.applied(60)], 40, 40),
        ([.applied(60)], 80, 60),
    ])
    func thePositionNeverPassesAChangeMemcachedDoesNotHave(
        events: [Event], heldBack: UInt64?, expected: UInt64
    ) {
        let progress = Self.run(events)
        #expect(progress.reportable(heldBack: heldBack.map(Self.lsn)) == Self.lsn(expected))
    }

    @Test func theServersEndOnlyGrowsAndConfirmingOnlyMovesForward() {
        var progress = Self.run([.walData(80), .keepalive(70), .applied(60)])
        #expect(progress.serverEnd == Self.lsn(80))
        #expect(progress.advances(to: Self.lsn(60)))
        progress.confirmed(Self.lsn(60))
        #expect(!progress.advances(to: Self.lsn(60)))
        progress.confirmed(Self.lsn(50))
        #expect(progress.confirmed == Self.lsn(60), "never goes back")
        progress.reset()
        #expect(progress == ReplicationProgress(), "a replaced database starts from nothing")
    }
}

extension ReplicationProgressTests.Event: Sendable {}
