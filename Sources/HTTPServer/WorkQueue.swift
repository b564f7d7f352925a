import Dispatch
import HTTP1
import Synchronization

/// A request handed to a worker thread.
struct Job: Sendable {
    var fd: Int32
    var connectionID: UInt64
    var request: HTTPRequest
    var keepAlive: Bool
}

/// A worker's encoded response on its way back to the event loop.
struct Completion: Sendable {
    var fd: Int32
    var connectionID: UInt64
    var bytes: [UInt8]
    var closeAfter: Bool
}

/// The bounded queue between the event loop and the worker threads.
///
/// A ``tryEnqueue(_:)`` that finds the queue full fails at once (the loop answers 503); workers
/// block in ``dequeue()`` on a semaphore that counts queued jobs.
final class WorkQueue: Sendable {
    private struct State {
        var ring: [Job?]
        var head = 0
        var count = 0
        var stopped = false
    }

    private let state: Mutex<State>
    private let available = DispatchSemaphore(value: 0)
    let capacity: Int
    /// Jobs queued and not yet taken, for ``HTTPServerStatistics``.
    let queued = Atomic<Int>(0)

    init(capacity: Int) {
        self.capacity = max(capacity, 1)
        self.state = Mutex(State(ring: Array(repeating: nil, count: max(capacity, 1))))
    }

    /// Queues `job`; false when the queue is full or stopped.
    func tryEnqueue(_ job: Job) -> Bool {
        let accepted = state.withLock { state -> Bool in
            guard !state.stopped, state.count < state.ring.count else { return false }
            state.ring[(state.head + state.count) % state.ring.count] = job
            state.count += 1
            return true
        }
        if accepted {
            queued.add(1, ordering: .relaxed)
            available.signal()
        }
        return accepted
    }

    /// Blocks until a job is queued; `nil` once the queue is stopped.
    func dequeue() -> Job? {
        available.wait()
        let job = state.withLock { state -> Job? in
            guard !state.stopped, state.count > 0 else { return nil }
            let job = state.ring[state.head]
            state.ring[state.head] = nil
            state.head = (state.head + 1) % state.ring.count
            state.count -= 1
            return job
        }
        if job != nil { queued.subtract(1, ordering: .relaxed) }
        return job
    }

    /// Wakes every worker with `nil`; queued jobs are dropped (their connections are closed).
    func stop(workerCount: Int) {
        let dropped = state.withLock { state -> Int in
            state.stopped = true
            let dropped = state.count
            state.ring = Array(repeating: nil, count: state.ring.count)
            state.count = 0
            return dropped
        }
        queued.subtract(dropped, ordering: .relaxed)
        for _ in 0..<workerCount { available.signal() }
    }
}

/// Completed responses waiting for the event loop, which an eventfd wakes.
final class Mailbox: Sendable {
    private let completions = Mutex<[Completion]>([])
    let eventFD: Int32

    init(eventFD: Int32) { self.eventFD = eventFD }

    /// Posts a completion; only the post that finds the mailbox empty pays for the wake-up.
    func post(_ completion: Completion) {
        let wasEmpty = completions.withLock { list in
            let wasEmpty = list.isEmpty
            list.append(completion)
            return wasEmpty
        }
        if wasEmpty { System.eventfdSignal(eventFD) }
    }

    /// Moves every posted completion into `buffer` (which must be empty), keeping both allocations.
    func take(into buffer: inout [Completion]) {
        completions.withLock { swap(&$0, &buffer) }
    }
}
