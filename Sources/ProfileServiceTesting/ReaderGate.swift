import Dispatch
import Synchronization

/// Holds the first reader of one id that reaches the hook it is installed as, until released:
/// a race replayed deterministically (any of `ProfileCacheHooks`' points).
public final class ReaderGate: Sendable {
    private let armedID = Mutex<Int64?>(nil)
    private let paused = DispatchSemaphore(value: 0)
    private let released = DispatchSemaphore(value: 0)

    public init() {}

    public func arm(_ id: Int64) { armedID.withLock { $0 = id } }

    /// The hook: pauses once, for the armed id.
    public func pause(_ id: Int64) {
        let shouldPause = armedID.withLock { armed in
            guard armed == id else { return false }
            armed = nil
            return true
        }
        guard shouldPause else { return }
        paused.signal()
        released.wait()
    }

    public func waitUntilPaused() { paused.wait() }
    public func release() { released.signal() }
}
