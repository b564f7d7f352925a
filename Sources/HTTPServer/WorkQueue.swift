import Dispatch
import HTTP1
import Synchronization

/// The bounded queue between the event loop and the worker threads, with a parking lot.
///
/// A ``tryEnqueue(_:_:connection:)`` that finds the queue full fails at once (the loop answers 503).
///
/// What the responder made of each request waits beside its job, typed (``TypedSlots``), and goes
/// to the worker with it as a ``BatchedRequest``.
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
    /// Workers spinning at once; more would steal the CPU from the loop on a small machine.
    private let maxSpinning: Int
    /// How long a worker polls for a job before it parks.
    private static var spinTime: Duration { .microseconds(50) }

    private let state: Mutex<WorkQueueState>
    /// What the responder made of each queued request, at its job's place in the ring; touched
    /// only under `state`'s lock. Not in the state, so that the state is not generic: the code
    /// is not specialized for `Classified`, and would look up the state's type at every lock.
    private nonisolated(unsafe) let classified: TypedSlots<Classified>
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
        self.state = Mutex(WorkQueueState(ring: Array(repeating: nil, count: max(capacity, 1))))
        self.classified = TypedSlots(capacity: max(capacity, 1))
        self.parkingSpots = (0..<max(workerCount, 1)).map { _ in DispatchSemaphore(value: 0) }
    }

    /// Queues `request` with what the responder made of it; false when the queue is full or stopped.
    func tryEnqueue(_ request: HTTPRequest, _ classified: Classified, connection: ConnectionTicket) -> Bool {
        let (accepted, wake) = state.withLock { state -> (Bool, Int?) in
            guard !state.stopped, state.count < state.ring.count else { return (false, nil) }
            let place = (state.head + state.count) % state.ring.count
            state.ring[place] = Job(request: request, connection: connection)
            self.classified.put(classified, at: place)
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

    /// Puts requests a worker took but left unanswered back at the front of the queue, for any
    /// worker to take alone — or, `together`, for one worker to take all at once. Returns those
    /// that did not fit (the queue filled meanwhile): the caller answers them itself.
    func requeue(
        _ members: [BatchedRequest<Classified>], together: Bool = false
    ) -> [BatchedRequest<Classified>] {
        guard !members.isEmpty else { return [] }
        let (overflow, wake) = state.withLock { state -> ([BatchedRequest<Classified>], [Int]) in
            var overflow: [BatchedRequest<Classified>] = []
            var group: UInt64 = 0
            if together {
                state.lastGroup &+= 1
                if state.lastGroup == 0 { state.lastGroup = 1 }
                group = state.lastGroup
            }
            for member in members.reversed() {
                guard !state.stopped, state.count < state.ring.count else {
                    overflow.append(member)
                    continue
                }
                state.head = (state.head - 1 + state.ring.count) % state.ring.count
                state.ring[state.head] = Job(
                    request: member.request, connection: member.connection, alone: !together, group: group)
                classified.put(member.classified, at: state.head)
                state.count += 1
            }
            var wake: [Int] = []
            // A group is one worker's work: it needs one worker on its way, not one per job.
            let work = together ? state.count - (members.count - overflow.count) + 1 : state.count
            while work > state.waking + state.spinning, let worker = state.parked.popLast() {
                state.waking += 1
                wake.append(worker)
            }
            return (overflow.reversed(), wake)
        }
        queued.add(members.count - overflow.count, ordering: .relaxed)
        for worker in wake { parkingSpots[worker].signal() }
        return overflow
    }

    /// Replaces `batch` with the next requests for worker `index` — at most `limit`, as many as
    /// are queued, and one left by a batch alone — parking until there is one. They pass through
    /// the worker's `intake`.
    /// - Returns: nil once stopped; else ``BatchOrigin/handedOn`` when a batch handed the
    ///   requests on, ``BatchOrigin/queue`` when not.
    func dequeue(
        worker index: Int, limit: Int, intake: Intake<Classified>, into batch: inout [BatchedRequest<Classified>]
    ) -> BatchOrigin? {
        if !batch.isEmpty { batch.removeAll(keepingCapacity: true) }
        var woken = false
        var spinning = false
        var spun = false
        while true {
            let step = state.withLock { state -> DequeueStep in
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
                        takeHead(&state, into: intake)
                    }
                    return .took(handedOn: true)
                }
                let handedOn = state.ring[state.head]!.alone
                for _ in 0..<min(max(limit, 1), state.count) {
                    let job = state.ring[state.head]!
                    if job.alone || job.group != 0, !intake.jobs.isEmpty { break }
                    takeHead(&state, into: intake)
                    if job.alone { break }
                }
                return .took(handedOn: handedOn)
            }
            woken = false
            spinning = false
            switch step {
            case .took(let handedOn):
                queued.subtract(intake.jobs.count, ordering: .relaxed)
                for (slot, job) in intake.jobs.enumerated() {
                    batch.append(
                        BatchedRequest(
                            request: job.request, classified: intake.classified.take(at: slot),
                            connection: job.connection))
                }
                intake.jobs.removeAll(keepingCapacity: true)
                return handedOn ? .handedOn : .queue
            case .stopped:
                return nil
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

    /// Moves the job at the head of the ring, and its classified value, into `intake`.
    private func takeHead(_ state: inout WorkQueueState, into intake: Intake<Classified>) {
        intake.classified.grow(to: intake.jobs.count + 1)
        intake.classified.put(classified.take(at: state.head), at: intake.jobs.count)
        intake.jobs.append(state.ring[state.head].take()!)
        state.head = (state.head + 1) % state.ring.count
        state.count -= 1
    }

    /// Wakes every worker with `nil`; queued jobs are dropped (their connections are closed).
    func stop() {
        let (dropped, parked) = state.withLock { state -> (Int, [Int]) in
            state.stopped = true
            let dropped = state.count
            state.ring = Array(repeating: nil, count: state.ring.count)
            classified.removeAll()
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

/// A worker's room for what it takes from a ``WorkQueue``: jobs and their classified values are
/// moved here under the queue's lock, and made into ``BatchedRequest``s once it is released, so
/// that the lock is held for plain moves only (array operations on a generic element, unspecialized,
/// cost a type lookup each).
final class Intake<Classified: Sendable> {
    fileprivate var jobs: [Job] = []
    fileprivate let classified = TypedSlots<Classified>(capacity: 0)
}

/// What a ``WorkQueue`` keeps under its lock.
private struct WorkQueueState {
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
    /// The last group number given (``WorkQueue/requeue(_:together:)``).
    var lastGroup: UInt64 = 0
}

/// What a worker does next in ``WorkQueue/dequeue(worker:limit:intake:into:)``.
private enum DequeueStep {
    case took(handedOn: Bool)
    case stopped
    case spin
    case park
}
