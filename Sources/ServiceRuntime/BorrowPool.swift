import Dispatch
import Synchronization

/// At most `capacity` objects that no two threads may use at once (a libpq connection, or a
/// reader built on several), shared by many threads one borrower at a time.
///
/// Objects are made on first need, so a pool that is never busy never opens `capacity`
/// connections, and are kept once made. The first free one is lent: under light load the same
/// few connections serve every thread, their buffers warm.
///
/// Used where threads outnumber the connections a server should see: the service's workers
/// block on memcached and PostgreSQL round trips, so there are many of them (docs/design.md §9),
/// and each borrows a PostgreSQL connection only for the statement it sends.
///
/// ```swift
/// let pool = BorrowPool(capacity: 16, make: { makeConnection() }, handOff: { $0.releaseOwnerThread() })
/// let row = try pool.borrow { connection in try connection.execute(statement, [id]) }
/// ```
public final class BorrowPool<Resource>: Sendable {
    /// Objects made at most.
    public let capacity: Int
    private let make: @Sendable () -> Resource
    private let handOff: @Sendable (Resource) -> Void
    private let slots: [Slot]
    private let free: DispatchSemaphore
    private let madeCount = Atomic<Int>(0)

    /// One place of the pool: its object once made, and whether a borrower holds it. A borrower
    /// claims a slot with a compare-and-exchange (acquiring) and gives it back with a releasing
    /// store, which orders one borrower's use of the object before the next's. No lock: with
    /// more threads than cores, a lock holder preempted mid-borrow made every other borrower
    /// sleep on it (a futex wait and wake per borrow, which doubled a write's CPU).
    private final class Slot: @unchecked Sendable {
        let taken = Atomic<Bool>(false)
        /// Read and written only by the borrower holding the slot (or by `make` for it).
        var resource: Resource?
    }

    /// - Parameters:
    ///   - make: Makes an object; called on the borrowing thread.
    ///   - handOff: Run on the borrowing thread as each borrow ends, before the object goes back:
    ///     lets the object's thread check accept the next borrower (``OwnerThread/release()``).
    public init(
        capacity: Int, make: @escaping @Sendable () -> Resource, handOff: @escaping @Sendable (Resource) -> Void = { _ in }
    ) {
        precondition(capacity > 0, "a pool lends at least one object")
        self.capacity = capacity
        self.make = make
        self.handOff = handOff
        slots = (0..<capacity).map { _ in Slot() }
        // Made empty and filled: libdispatch traps when a semaphore is freed below the value it
        // was made with, which a pool freed with objects lent would be.
        free = DispatchSemaphore(value: 0)
        for _ in 0..<capacity { free.signal() }
    }

    /// Objects made so far (lent or idle).
    public var made: Int { madeCount.load(ordering: .relaxed) }

    /// Runs `body` with an object of the pool, waiting for one to come back while all are lent.
    public func borrow<T, E: Error>(_ body: (Resource) throws(E) -> T) throws(E) -> T {
        free.wait()
        return try lend(body)
    }

    /// Runs `body` with an object of the pool, or returns `nil` at once while all are lent.
    public func borrowIfFree<T, E: Error>(_ body: (Resource) throws(E) -> T) throws(E) -> T? {
        guard free.wait(timeout: .now()) == .success else { return nil }
        return try lend(body)
    }

    /// Runs `body` on every idle object, on the calling thread (closing them, say); objects lent
    /// now are not visited.
    public func forEachIdle(_ body: (Resource) -> Void) {
        for slot in slots where slot.taken.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {
            if let resource = slot.resource { body(resource) }
            slot.taken.store(false, ordering: .releasing)
        }
    }

    /// Lends an object; the caller holds a place of `free`, so some slot is or will be free.
    /// Slots are tried from the first: under light load the same few objects serve every
    /// borrower, and the pool makes no more than the load needs.
    private func lend<T, E: Error>(_ body: (Resource) throws(E) -> T) throws(E) -> T {
        var index = 0
        while !slots[index].taken.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {
            index = (index + 1) % slots.count
        }
        let slot = slots[index]
        let resource: Resource
        if let made = slot.resource {
            resource = made
        } else {
            resource = make()
            slot.resource = resource
            madeCount.add(1, ordering: .relaxed)
        }
        defer {
            handOff(resource)
            slot.taken.store(false, ordering: .releasing)
            free.signal()
        }
        return try body(resource)
    }
}
