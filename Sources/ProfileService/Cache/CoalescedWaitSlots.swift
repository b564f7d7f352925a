import Synchronization

/// How many requests of this process may wait at once for another request's PostgreSQL read.
///
/// A waiting request holds a worker thread. Without a limit, a slow read of one hot id gathers
/// every worker behind it, and unrelated requests queue until they time out or the queue is full
/// (503). With at most ``limit`` waiting (the service uses half its workers), the others keep
/// serving; a request that finds no slot answers 503 at once (docs/design.md §5).
final class CoalescedWaitSlots: Sendable {
    let limit: Int
    private let taken = Atomic<Int>(0)

    init(limit: Int) {
        precondition(limit >= 0, "the limit of waiting requests cannot be negative")
        self.limit = limit
    }

    /// Takes a slot if one is free; pair a `true` with ``release()``.
    func acquire() -> Bool {
        var current = taken.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = taken.compareExchange(
                expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
        return false
    }

    func release() {
        taken.subtract(1, ordering: .releasing)
    }

    /// Slots in use now.
    var inUse: Int { taken.load(ordering: .relaxed) }
}
