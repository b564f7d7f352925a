import Dispatch
import HTTP1
import Synchronization

/// The bounded queue between the event loop and the worker threads, with a parking lot.
///
/// A ``tryEnqueue(_:)`` that finds the queue full fails at once (the loop answers 503).
///
/// Wake-ups are the expensive part on a small machine: waking a sleeping thread for every request
/// made 16 workers four times slower than 2 on a trivial route (each wake is a futex call plus a
/// context switch, and 16 runnable threads fight over 2 cores). So a worker that finishes a job takes
/// the next one without sleeping, and the loop wakes a parked worker only when there are more queued
/// jobs than workers already on their way can take (each takes up to its batch limit, see
/// ``HTTPResponder/batchLimit(worker:)``). Parked workers are woken last-in first-out (the most
/// recently active thread, whose stack is still in cache), each on its own semaphore.
///
/// Before parking, one worker at a time spins briefly (yielding the CPU) for the next job: under
/// load one arrives within microseconds, and a spinning worker counts as one on its way, so the loop
/// does not pay a futex wake and the worker a sleep and a context switch.
final class WorkQueue<Classified: Sendable>: Sendable {
    private struct State {
        var ring: [Job<Classified>?]
        var head = 0
        var count = 0
        var stopped = false
        /// Indices of workers waiting on their semaphore, most recent last.
        var parked: [Int] = []
        /// Workers signalled but not yet back in the queue.
        var waking = 0
        /// Workers polling for a job before they park.
        var spinning = 0
        /// How many jobs a worker took at most, last time one asked: a worker on its way will
        /// take that many, so fewer need waking.
        var takeLimit = 1
        /// The last group number given (``requeue(_:together:)``).
        var lastGroup: UInt64 = 0
    }

    private enum Step {
        case took
        case stopped
        case spin
        case park
    }

    /// Workers spinning at once; more would steal the CPU from the loop on a small machine.
    private let maxSpinning: Int
    /// How long a worker polls for a job before it parks.
    private static var spinTime: Duration { .microseconds(50) }

    private let state: Mutex<State>
    private let parkingSpots: [DispatchSemaphore]
    let capacity: Int
    /// Jobs queued and not yet taken, for ``HTTPServerStatistics``.
    let queued = Atomic<Int>(0)

    /// - Parameter spins: whether a worker polls briefly before it parks (see the type). Not for
    ///   the batch lane: its workers come back from a round trip, not from a few microseconds of
    ///   work, and a worker that yields the CPU on a busy machine pays a context switch a time.
    init(capacity: Int, workerCount: Int, spins: Bool = true) {
        maxSpinning = spins ? 1 : 0
        self.capacity = max(capacity, 1)
        self.state = Mutex(State(ring: Array(repeating: nil, count: max(capacity, 1))))
        self.parkingSpots = (0..<max(workerCount, 1)).map { _ in DispatchSemaphore(value: 0) }
    }

    /// Queues `job`; false when the queue is full or stopped.
    func tryEnqueue(_ job: Job<Classified>) -> Bool {
        let (accepted, wake) = state.withLock { state -> (Bool, Int?) in
            guard !state.stopped, state.count < state.ring.count else { return (false, nil) }
            state.ring[(state.head + state.count) % state.ring.count] = job
            state.count += 1
            guard state.count > (state.waking + state.spinning) * state.takeLimit, let worker = state.parked.popLast()
            else {
                return (true, nil)
            }
            state.waking += 1
            return (true, worker)
        }
        if accepted { queued.add(1, ordering: .relaxed) }
        if let wake { parkingSpots[wake].signal() }
        return accepted
    }

    /// Puts jobs a worker took but left unanswered back at the front of the queue, for any
    /// worker to take alone — or, `together`, for one worker to take all at once. Returns those
    /// that did not fit (the queue filled meanwhile): the caller answers them itself.
    func requeue(_ jobs: [Job<Classified>], together: Bool = false) -> [Job<Classified>] {
        guard !jobs.isEmpty else { return [] }
        let (overflow, wake) = state.withLock { state -> ([Job<Classified>], [Int]) in
            var overflow: [Job<Classified>] = []
            var group: UInt64 = 0
            if together {
                state.lastGroup &+= 1
                if state.lastGroup == 0 { state.lastGroup = 1 }
                group = state.lastGroup
            }
            for var job in jobs.reversed() {
                job.alone = !together
                job.group = group
                guard !state.stopped, state.count < state.ring.count else {
                    overflow.append(job)
                    continue
                }
                state.head = (state.head - 1 + state.ring.count) % state.ring.count
                state.ring[state.head] = job
                state.count += 1
            }
            var wake: [Int] = []
            // A group is one worker's work: it needs one worker on its way, not one per job.
            let work = together ? state.count - (jobs.count - overflow.count) + 1 : state.count
            while work > state.waking + state.spinning, let worker = state.parked.popLast() {
                state.waking += 1
                wake.append(worker)
            }
            return (overflow.reversed(), wake)
        }
        queued.add(jobs.count - overflow.count, ordering: .relaxed)
        for worker in wake { parkingSpots[worker].signal() }
        return overflow
    }

    /// Replaces `batch` with the next jobs for worker `index` — at most `limit`, as many as are
    /// queued, and a job left by a batch alone — parking until there is one; false once stopped.
    func dequeue(worker index: Int, limit: Int, into batch: inout [Job<Classified>]) -> Bool {
        batch.removeAll(keepingCapacity: true)
        var woken = false
        var spinning = false
        var spun = false
        while true {
            let step = state.withLock { state -> Step in
                if woken { state.waking -= 1 }
                if spinning { state.spinning -= 1 }
                if state.stopped { return .stopped }
                state.takeLimit = max(limit, 1)
                guard state.count > 0 else {
                    if !spun, state.spinning < maxSpinning {
                        state.spinning += 1
                        return .spin
                    }
                    state.parked.append(index)
                    return .park
                }
                if let first = state.ring[state.head], first.group != 0 {
                    // A group, whole, whatever the limit.
                    while state.count > 0, let job = state.ring[state.head], job.group == first.group {
                        batch.append(job)
                        state.ring[state.head] = nil
                        state.head = (state.head + 1) % state.ring.count
                        state.count -= 1
                    }
                    return .took
                }
                for _ in 0..<min(max(limit, 1), state.count) {
                    let job = state.ring[state.head]!
                    if job.alone || job.group != 0, !batch.isEmpty { break }
                    batch.append(job)
                    state.ring[state.head] = nil
                    state.head = (state.head + 1) % state.ring.count
                    state.count -= 1
                    if job.alone { break }
                }
                return .took
            }
            woken = false
            spinning = false
            switch step {
            case .took:
                queued.subtract(batch.count, ordering: .relaxed)
                return true
            case .stopped:
                return false
            case .spin:
                spinning = true
                spun = true
                let deadline = ContinuousClock.now.advanced(by: Self.spinTime)
                while queued.load(ordering: .relaxed) == 0, ContinuousClock.now < deadline { System.yield() }
            case .park:
                parkingSpots[index].wait()
                woken = true
                spun = false
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
