#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The thread that owns a resource no two threads may use (a libpq or libmemcached handle): the
/// first ``check()`` records the calling thread, and every later one stops the process with a
/// `precondition` unless it comes from that thread.
///
/// One checker for every owner of a C handle, as GRDB checks its queue before touching the
/// connection (`SchedulingWatchdog.preconditionValidQueue`) and NIO's `NIOLoopBound` checks the
/// event loop on each access: the owner stores one and calls ``check()`` at the top of every
/// operation and of `close()`.
///
/// ```swift
/// private var ownerThread = OwnerThread("PostgresConnection")
/// public func execute(…) throws -> PostgresQueryResult {
///     ownerThread.check()
///     …
/// }
/// ```
///
/// The thread is recorded on first use rather than at creation, so a resource may be made on one
/// thread and handed, unused, to the worker thread that owns it from then on.
public struct OwnerThread {
    /// What is owned, for the failure message.
    private let resource: StaticString
    /// The thread of the first ``check()``; `nil` until then.
    private var owner: pthread_t?

    /// A checker bound to no thread yet.
    /// - Parameter resource: Names the owner in the failure message, e.g. `"PostgresConnection"`.
    public init(_ resource: StaticString) {
        self.resource = resource
    }

    /// Records the calling thread on first use; afterwards stops the process unless called from it.
    @inline(__always)
    public mutating func check() {
        let current = pthread_self()
        if let owner {
            precondition(pthread_equal(owner, current) != 0, "\(resource) used off its owner thread")
        } else {
            owner = current
        }
    }

    /// Gives the resource up: the next ``check()`` records its caller as the owner. Call it on
    /// the owner thread when handing the resource to another thread (a pool does, on return).
    public mutating func release() {
        check()
        owner = nil
    }

    /// Whether the calling thread may use the resource: no thread has yet, or it is the owner.
    /// Records nothing.
    public var isCurrentThreadAllowed: Bool {
        guard let owner else { return true }
        return pthread_equal(owner, pthread_self()) != 0
    }
}

// pthread_t is an integer on Linux but a pointer on Darwin; an owner is used by its thread only.
@available(*, unavailable)
extension OwnerThread: Sendable {}
