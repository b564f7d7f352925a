import HTTP1
import Synchronization

/// What the event loop, the workers and the public ``HTTPServer`` share. Every member is `Sendable`.
final class ServerCore<Classified: Sendable>: Sendable {
    let queue: WorkQueue<Classified>
    /// The batch lane's queue for each loop's requests, by loop index
    /// (``HTTPServerConfiguration/batchWorkerCount`` workers spread over the loops); nil where no
    /// lane worker serves the loop.
    let lanes: [WorkQueue<Classified>?]
    /// Every event loop; an answer goes back to the loop that owns its connection
    /// (``ConnectionTicket/loop``).
    let loops: [LoopPeer]
    /// Set once shutdown begins: responses from then on carry `Connection: close`.
    let draining = Atomic<Bool>(false)
    let shutdownRequested = Atomic<Bool>(false)
    let openConnections = Atomic<Int>(0)
    /// Idle keep-alive connections closed to make room for a new one at the connection limit.
    let idleClosedForRoom = Atomic<Int>(0)
    /// Requests answered 503 at once because every queue was full.
    let refusedAtCapacity = Atomic<Int>(0)
    let busyWorkers = Atomic<Int>(0)
    /// The event streams the loop serves, if the server has any.
    let eventStreams: EventStreams?
    /// The responder's ``HTTPResponder/classify(head:bodyFollows:)``, for the loops.
    let classify: @Sendable (_ head: HTTPRequest, _ bodyFollows: Bool) -> RequestClassification<Classified>

    init(
        queueCapacity: Int, workerCount: Int, batchWorkerCount: Int = 0, loops: [(epollFD: Int32, eventFD: Int32)],
        eventStreams: EventStreams?,
        classify: @escaping @Sendable (_ head: HTTPRequest, _ bodyFollows: Bool) -> RequestClassification<Classified>
    ) {
        self.classify = classify
        queue = WorkQueue(capacity: queueCapacity, workerCount: workerCount)
        // Batch worker `i` serves loop `i % loops.count`'s lane: a loop's requests never wait on
        // a lock another loop takes (one shared lane cost 2.5 times the CPU per hit at 8 loops).
        lanes = (0..<loops.count).map { loop -> WorkQueue<Classified>? in
            let laneWorkers = (batchWorkerCount - loop + loops.count - 1) / loops.count
            return laneWorkers > 0 ? WorkQueue(capacity: queueCapacity, workerCount: laneWorkers, spins: false) : nil
        }
        // Every worker posts to a loop from a slot of its own: the batch lane's come after the others.
        self.loops = loops.enumerated().map { index, descriptors in
            LoopPeer(
                index: index, epollFD: descriptors.epollFD,
                mailbox: Mailbox(eventFD: descriptors.eventFD, workerCount: workerCount + batchWorkerCount))
        }
        self.eventStreams = eventStreams
    }

    /// Wakes every loop (to see shutdown begin).
    func wakeLoops() {
        for loop in loops { System.eventfdSignal(loop.mailbox.eventFD) }
    }

    /// Stops every queue: every worker wakes and leaves; queued jobs are dropped.
    func stopQueues() {
        queue.stop()
        for lane in lanes { lane?.stop() }
    }
}
