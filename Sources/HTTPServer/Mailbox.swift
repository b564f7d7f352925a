import Synchronization

/// What other threads hand to one event loop, which its eventfd wakes: workers' completed
/// responses, and connections another loop accepted for it.
///
/// One completion slot per worker, so workers never contend with each other (a single shared
/// list was 12% of CPU in lock contention with 16 workers); only the first post after the loop
/// last looked pays for the eventfd write.
final class Mailbox: Sendable {
    private final class Slot: Sendable {
        let completions = Mutex<[Completion]>([])
    }

    private let slots: [Slot]
    private let handedOver = Mutex<[AcceptedConnection]>([])
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
        wake()
    }

    /// Hands the loop a connection accepted by another loop.
    func post(_ connection: AcceptedConnection) {
        handedOver.withLock { $0.append(connection) }
        wake()
    }

    private func wake() {
        if !notified.exchange(true, ordering: .sequentiallyConsistent) { System.eventfdSignal(eventFD) }
    }

    /// Appends every posted completion to `completions` and every handed-over connection to `connections`.
    func take(into completions: inout [Completion], connections: inout [AcceptedConnection]) {
        notified.store(false, ordering: .sequentiallyConsistent)
        for slot in slots {
            slot.completions.withLock { posted in
                guard !posted.isEmpty else { return }
                if completions.isEmpty {
                    swap(&posted, &completions)
                } else {
                    completions.append(contentsOf: posted)
                    posted.removeAll(keepingCapacity: true)
                }
            }
        }
        handedOver.withLock { handed in
            guard !handed.isEmpty else { return }
            swap(&handed, &connections)
        }
    }

    /// The connections handed over and never taken (the loop had stopped): the server closes them.
    func takeUnclaimedConnections() -> [AcceptedConnection] {
        handedOver.withLock { handed in
            defer { handed = [] }
            return handed
        }
    }
}

/// A socket one loop accepted, on its way to the loop that will serve it.
struct AcceptedConnection: Sendable {
    var fd: Int32
    var peerAddress: String
    /// The process was at its connection limit when it came: the idle keep-alive connection idle
    /// the longest, on whichever loop, is closed to make room (``EventLoop``'s `makeRoom`).
    var needsRoom: Bool
    /// Loops that have looked for their oldest idle connection; all of them: the survey is done.
    var loopsAsked = 0
    /// The oldest idle connection found so far: its loop and when its last request came.
    var oldestIdle: (loop: Int, lastRequestAt: ContinuousClock.Instant)?
}
