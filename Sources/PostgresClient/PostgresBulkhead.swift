import Dispatch
import Synchronization

/// Bounds how many connections of a process wait on PostgreSQL at once (docs/design.md §5.3), so
/// that when the server stops answering, the threads that do not need it — a cached read, a
/// health check — are never all stuck behind it.
///
/// A statement enters before it is sent and leaves when its answer (or failure) is in. When every
/// place is taken, a statement waits for one — the server is busy, places free up within
/// milliseconds — but only while the server makes progress: once no statement has finished for
/// ``stallAfter`` (nor started on a free place), the server is stalled rather than busy, and a statement that finds no place is
/// refused at once (the caller answers 503) instead of taking another thread down with it.
///
/// ``PostgresConnectionPool`` holds one of the pool's size: a borrower enters before it takes a
/// connection and leaves when it gives it back.
public final class PostgresBulkhead: Sendable {
    /// Statements in flight at most.
    public let limit: Int
    /// No statement finished for this long while every place is taken: the server is stalled.
    public let stallAfter: Duration
    private let places: DispatchSemaphore
    /// `DispatchTime.now().uptimeNanoseconds` when a statement last finished (or the bulkhead
    /// was made).
    private let lastProgress: Atomic<UInt64>
    private let refusedCount = Atomic<Int>(0)

    public init(limit: Int, stallAfter: Duration = .milliseconds(50)) {
        precondition(limit > 0, "a bulkhead needs at least one place")
        self.limit = limit
        self.stallAfter = stallAfter
        // Made empty and filled: libdispatch traps when a semaphore is freed below the value it
        // was made with, which a bulkhead freed with places taken would be.
        places = DispatchSemaphore(value: 0)
        for _ in 0..<limit { places.signal() }
        lastProgress = Atomic(DispatchTime.now().uptimeNanoseconds)
    }

    /// Statements refused so far because the server was stalled and every place was taken.
    public var refused: Int { refusedCount.load(ordering: .relaxed) }

    /// Takes a place; false when the statement must not wait for one (see the type).
    ///
    /// A statement that takes a free place counts as progress too: after a quiet spell the first
    /// burst fills every place at once, and the next statement must wait for one of them to
    /// finish, not be refused because nothing had finished during the quiet.
    func enter() -> Bool {
        if places.wait(timeout: .now()) == .success {
            lastProgress.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
            return true
        }
        let stall = UInt64(stallAfter.components.seconds) * 1_000_000_000
            + UInt64(stallAfter.components.attoseconds / 1_000_000_000)
        let sinceProgress = DispatchTime.now().uptimeNanoseconds &- lastProgress.load(ordering: .relaxed)
        if sinceProgress < stall,
            places.wait(timeout: .now() + .nanoseconds(Int(stall - sinceProgress))) == .success
        {
            return true
        }
        refusedCount.add(1, ordering: .relaxed)
        return false
    }

    /// Gives the place back: the statement's answer (or failure) is in.
    func leave() {
        lastProgress.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
        places.signal()
    }
}
