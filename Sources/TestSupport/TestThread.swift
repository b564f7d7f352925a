import Dispatch
import Foundation

/// Runs `body` on a thread of its own (not the Swift concurrency pool: the body may block on
/// libpq, libmemcached or a socket); `join()` waits for it.
public final class TestThread: Sendable {
    private let done = DispatchSemaphore(value: 0)

    public init(_ body: @escaping @Sendable () -> Void) {
        let done = self.done
        let thread = Thread {
            body()
            done.signal()
        }
        thread.start()
    }

    public func join() { done.wait() }
}
