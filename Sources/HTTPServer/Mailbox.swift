import Synchronization

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
