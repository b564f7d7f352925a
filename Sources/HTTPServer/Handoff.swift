import Synchronization

/// Who owns the write side of a connection while its request is with a worker. Shared by the event
/// loop and (for one request at a time) one worker.
///
/// The loop arms it when it dispatches a request; the worker may then `send` the response on the
/// socket itself. The worker gives the connection back with ``workerFinished()`` *after* its last
/// use of the descriptor, and the loop never closes a connection (never frees its descriptor number)
/// until it has been given back, so a worker can never write into a reused descriptor.
///
/// ```
/// idle ─dispatch→ inWorker ─loop needs to hear back (readiness, shutdown)→ watched
///   ↑                 │                                                       │
///   └─workerFinished──┘                  workerFinished → post `.written`  ←──┘
/// ```
final class Handoff: Sendable {
    private static let idle: UInt8 = 0
    private static let inWorker: UInt8 = 1
    private static let watched: UInt8 = 2
    private let state = Atomic<UInt8>(0)

    /// Loop: the request goes to a worker. `watched`: the loop wants to hear when the worker is done
    /// (it holds pipelined bytes, or the socket may hold more).
    func dispatch(watched: Bool) {
        state.store(watched ? Self.watched : Self.inWorker, ordering: .releasing)
    }

    /// Loop: takes the connection back without a worker (the request never reached one, or the
    /// worker posted a completion and will not touch the socket again).
    func reclaim() {
        state.store(Self.idle, ordering: .releasing)
    }

    /// Loop: whether the loop owns the connection (no worker may touch the socket).
    var isIdle: Bool { state.load(ordering: .acquiring) == Self.idle }

    /// Loop: asks the worker to post `.written` when it finishes; true if it has already finished.
    func watch() -> Bool {
        let (exchanged, original) = state.compareExchange(
            expected: Self.inWorker, desired: Self.watched, ordering: .acquiringAndReleasing)
        return !exchanged && original == Self.idle
    }

    /// Worker: done with the socket; true if the loop asked to hear about it.
    func workerFinished() -> Bool {
        state.exchange(Self.idle, ordering: .acquiringAndReleasing) == Self.watched
    }
}
