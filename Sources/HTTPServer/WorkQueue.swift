import Dispatch
import HTTP1
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

/// A request handed to a worker thread.
struct Job: Sendable {
    var fd: Int32
    var connectionID: UInt64
    var request: HTTPRequest
    var keepAlive: Bool
    var handoff: Handoff
    /// The worker may `send` a keep-alive response itself (no output of the loop is pending).
    var mayWriteDirectly: Bool
    /// A batch left it unanswered (``HTTPResponder/respond(to:worker:answer:)``): it is taken
    /// alone and answered with ``HTTPResponder/respond(to:worker:)``.
    var alone = false
}

/// A worker's message about a connection, on its way back to the event loop.
struct Completion: Sendable {
    enum Kind: Sendable {
        /// An encoded response (or its unsent tail) for the loop to write.
        case response(bytes: [UInt8], closeAfter: Bool)
        /// The worker wrote the whole response itself and the loop had asked to hear about it.
        case written
        /// The worker's `send` failed: the connection is dead.
        case failed
        /// The response opens an event stream: the loop writes `bytes` and keeps the connection.
        case stream(bytes: [UInt8], stream: HTTPResponse.EventStream)
    }

    var fd: Int32
    var connectionID: UInt64
    var kind: Kind
}

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
        /// Workers polling for a job before they park.
        var spinning = 0
        /// How many jobs a worker took at most, last time one asked: a worker on its way will
        /// take that many, so fewer need waking.
        var takeLimit = 1
    }

    private enum Step {
        case took
        case stopped
        case spin
        case park
    }

    /// Workers spinning at once; more would steal the CPU from the loop on a small machine.
    private static let maxSpinning = 1
    /// How long a worker polls for a job before it parks.
    private static let spinTime: Duration = .microseconds(50)

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
    /// worker to take alone. Returns those that did not fit (the queue filled meanwhile): the
    /// caller answers them itself.
    func requeue(_ jobs: [Job]) -> [Job] {
        let (overflow, wake) = state.withLock { state -> ([Job], [Int]) in
            var overflow: [Job] = []
            for var job in jobs.reversed() {
                job.alone = true
                guard !state.stopped, state.count < state.ring.count else {
                    overflow.append(job)
                    continue
                }
                state.head = (state.head - 1 + state.ring.count) % state.ring.count
                state.ring[state.head] = job
                state.count += 1
            }
            var wake: [Int] = []
            while state.count > state.waking + state.spinning, let worker = state.parked.popLast() {
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
    func dequeue(worker index: Int, limit: Int, into batch: inout [Job]) -> Bool {
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
                    if !spun, state.spinning < Self.maxSpinning {
                        state.spinning += 1
                        return .spin
                    }
                    state.parked.append(index)
                    return .park
                }
                for _ in 0..<min(max(limit, 1), state.count) {
                    let job = state.ring[state.head]!
                    if job.alone, !batch.isEmpty { break }
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
