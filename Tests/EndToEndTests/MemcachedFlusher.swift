import Foundation
import Logging
import MemcachedClient
import Synchronization
import TestSupport

/// Empties every memcached node of the test cluster every `interval` until ``stop()``, on a thread
/// and a connection of its own: nearly every read misses (the flush storms of the end-to-end tests).
final class MemcachedFlusher: Sendable {
    private let flushCount = Atomic<Int>(0)
    private let running = Atomic<Bool>(true)
    private let thread = Mutex<TestThread?>(nil)

    init(every interval: Duration) {
        let microseconds = UInt32(interval / .microseconds(1))
        thread.withLock {
            $0 = TestThread { [self] in
                var logger = Logger(label: "memcached-flusher")
                logger.logLevel = .critical
                guard let configuration = try? MemcachedConfiguration(servers: TestEnvironment.memcachedServerList),
                    let cache = try? MemcachedConnection(configuration: configuration, logger: logger)
                else { return }
                defer { cache.close() }
                while running.load(ordering: .relaxed) {
                    for server in cache.servers { _ = cache.flush(server: server) }
                    flushCount.add(1, ordering: .relaxed)
                    usleep(microseconds)
                }
            }
        }
    }

    /// Flushes of every node so far.
    var flushes: Int { flushCount.load(ordering: .relaxed) }

    /// Stops flushing and waits for the thread (again: nothing).
    func stop() {
        guard running.exchange(false, ordering: .relaxed) else { return }
        thread.withLock { $0 }?.join()
    }
}
