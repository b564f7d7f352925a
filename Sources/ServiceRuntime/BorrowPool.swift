import Dispatch
import Synchronization

/// At most `capacity` objects that no two threads may use at once (a libpq connection, or a
/// reader built on several), shared by many threads one borrower at a time.
///
/// Objects are made on first need, so a pool that is never busy never opens `capacity`
/// connections, and are kept once made. The most recently returned object is lent first: under
/// light load one connection serves every thread, its buffers warm.
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
    private let state: Mutex<State>
    private let free: DispatchSemaphore

    private struct State {
        var idle: [Lent] = []
        var made = 0
    }

    /// Carries an object between threads. The pool lends each to one thread at a time, and the
    /// lock taken to lend and to return it orders one borrower's use before the next's.
    private final class Lent: @unchecked Sendable {
        let resource: Resource
        init(_ resource: Resource) { self.resource = resource }
    }

    /// - Parameters:
    ///   - make: Makes an object; called on the borrowing thread, outside the pool's lock.
    ///   - handOff: Run on the borrowing thread as each borrow ends, before the object goes back:
    ///     lets the object's thread check accept the next borrower (``OwnerThread/release()``).
    public init(
        capacity: Int, make: @escaping @Sendable () -> Resource, handOff: @escaping @Sendable (Resource) -> Void = { _ in }
    ) {
        precondition(capacity > 0, "a pool lends at least one object")
        self.capacity = capacity
        self.make = make
        self.handOff = handOff
        state = Mutex(State())
        // Made empty and filled: libdispatch traps when a semaphore is freed below the value it
        // was made with, which a pool freed with objects lent would be.
        free = DispatchSemaphore(value: 0)
        for _ in 0..<capacity { free.signal() }
    }

    /// Objects made so far (lent or idle).
    public var made: Int { state.withLock { $0.made } }

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
        let idle = state.withLock { $0.idle }
        for lent in idle { body(lent.resource) }
    }

    /// Lends an object; the caller holds a place of `free`.
    private func lend<T, E: Error>(_ body: (Resource) throws(E) -> T) throws(E) -> T {
        let idle: Lent? = state.withLock { state in
            if let lent = state.idle.popLast() { return lent }
            state.made += 1
            return nil
        }
        let lent = idle ?? Lent(make())
        defer {
            handOff(lent.resource)
            state.withLock { $0.idle.append(lent) }
            free.signal()
        }
        return try body(lent.resource)
    }
}
