import Synchronization

/// Reads an async sequence in a task of its own and keeps every element it got, so a test can act
/// and then check what the stream gave meanwhile. Reading stops when the recorder is released.
public final class StreamRecorder<Element: Sendable>: Sendable {
    private let log = Mutex<[Element]>([])
    private let reader = Mutex<Task<Void, Never>?>(nil)

    public init<Elements: AsyncSequence & Sendable>(_ elements: Elements) where Elements.Element == Element {
        let task = Task { [weak self] in
            do {
                for try await element in elements { self?.log.withLock { $0.append(element) } }
            } catch {
                // A stream that throws has ended; what it gave before is kept.
            }
        }
        reader.withLock { $0 = task }
    }

    deinit { reader.withLock { $0?.cancel() } }

    /// Every element so far, in order.
    public var elements: [Element] { log.withLock { $0 } }

    /// Waits until `done` holds for the elements so far; false if `timeout` passed first.
    public func wait(timeout: Duration = .seconds(5), until done: ([Element]) -> Bool) async -> Bool {
        await Eventually.waitAsync(timeout: timeout, interval: .milliseconds(2)) { done(elements) }
    }
}
