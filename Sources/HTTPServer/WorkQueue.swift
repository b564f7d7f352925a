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

/// The bounded queue between the event loop and the worker threads, with a parking lot.
///
/// A ``tryEnqueue(_:)`` that finds the queue full fails at once (the loop answers 503).
///
/// Wake-ups are the expensive part on a small machine: waking a sleeping thread for every request
/// made 16 workers four times slower than 2 on a trivial route (each wake is a futex call plus a
/// context switch, and 16 runnable threads fight over 2 cores). So a worker that finishes a job takes
/// the next one without sleeping, and the loop wakes a parked worker only when there are more queued
/// jobs than workers already on their way. Parked workers are woken last-in first-out (the most
/// recently active thread, whose stack is still in cache), each on its own semaphore.
final class WorkQueue: Sendable {
    private struct State {
        var ring: [Job?]
        var head = 0
        var count = 0
        var stopped = false
        /// Indices of workers waiting on their semaphore, most recent last.
        var parked: [Int] = []
        /// Workers signalled but not yet back in the queue.
        var waking = 0
    }

    private let state: Mutex<State>
    private let parkingSpots: [DispatchSemaphore]
    let capacity: Int
    /// Jobs queued and not yet taken, for ``HTTPServerStatistics``.
    let queued = Atomic<Int>(0)

    init(capacity: Int, workerCount: Int) {
        self.capacity = max(capacity, 1)
        self.state = Mutex(State(ring: Array(repeating: nil, count: max(capacity, 1))))
        self.parkingSpots = (0..<max(workerCount, 1)).map { _ in DispatchSemaphore(value: 0) }
    }

    /// Queues `job`; false when the queue is full or stopped.
    func tryEnqueue(_ job: Job) -> Bool {
        let (accepted, wake) = state.withLock { state -> (Bool, Int?) in
            guard !state.stopped, state.count < state.ring.count else { return (false, nil) }
            state.ring[(state.head + state.count) % state.ring.count] = job
            state.count += 1
            guard state.count > state.waking, let worker = state.parked.popLast() else { return (true, nil) }
            state.waking += 1
            return (true, worker)
        }
        if accepted { queued.add(1, ordering: .relaxed) }
        if let wake { parkingSpots[wake].signal() }
        return accepted
    }

    /// Returns the next job for worker `index`, parking until there is one; `nil` once stopped.
    func dequeue(worker index: Int) -> Job? {
        var woken = false
        while true {
            let next = state.withLock { state -> Job?? in
                if woken { state.waking -= 1 }
                if state.stopped { return .some(nil) }
                guard state.count > 0 else {
                    state.parked.append(index)
                    return .none
                }
                let job = state.ring[state.head]
                state.ring[state.head] = nil
                state.head = (state.head + 1) % state.ring.count
                state.count -= 1
                return .some(job)
            }
            switch next {
            case .some(let job):
                if job != nil { queued.subtract(1, ordering: .relaxed) }
                return job
            case .none:
                parkingSpots[index].wait()
                woken = true
            }
        }
    }

    /// Wakes every worker with `nil`; queued jobs are dropped (their connections are closed).
    func stop() {
        let (dropped, parked) = state.withLock { state -> (Int, [Int]) in
            state.stopped = true
            let dropped = state.count
            state.ring = Array(repeating: nil, count: state.ring.count)
            state.count = 0
            let parked = state.parked
            state.parked = []
            state.waking += parked.count
            return (dropped, parked)
        }
        queued.subtract(dropped, ordering: .relaxed)
        for worker in parked { parkingSpots[worker].signal() }
    }
}

/// Completed responses waiting for the event loop, which an eventfd wakes.
///
/// One slot per worker, so workers never contend with each other (a single shared list was 12% of
/// CPU in lock contention with 16 workers); only the first post after the loop last looked pays for
/// the eventfd write.
final class Mailbox: Sendable {
    private final class Slot: Sendable {
        let completions = Mutex<[Completion]>([])
    }

    private let slots: [Slot]
    /// True while a wake-up is pending; the loop clears it before looking at the slots.
    private let notified = Atomic<Bool>(false)
    let eventFD: Int32

    init(eventFD: Int32, workerCount: Int) {
        self.eventFD = eventFD
        self.slots = (0..<max(workerCount, 1)).map { _ in Slot() }
    }

    /// Posts a completion from worker `index`.
    func post(_ completion: Completion, from index: Int) {
        slots[index].completions.withLock { $0.append(completion) }
        if !notified.exchange(true, ordering: .sequentiallyConsistent) { System.eventfdSignal(eventFD) }
    }

    /// Appends every posted completion to `buffer`.
    func take(into buffer: inout [Completion]) {
        notified.store(false, ordering: .sequentiallyConsistent)
        for slot in slots {
            slot.completions.withLock { completions in
                guard !completions.isEmpty else { return }
                if buffer.isEmpty {
                    swap(&completions, &buffer)
                } else {
                    buffer.append(contentsOf: completions)
                    completions.removeAll(keepingCapacity: true)
                }
            }
        }
    }
}
