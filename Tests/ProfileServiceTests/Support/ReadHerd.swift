import Dispatch
import Synchronization
import TestSupport

@testable import ProfileService

/// `threads` threads, each with its own connections, read `id` `readsPerThread` times, all
/// starting together; returns every version read (-1 for a failed read).
func readHerd(of id: Int64, shared: ProfileCacheShared, threads: Int = 16, readsPerThread: Int = 7) -> [Int32] {
    let versions = Mutex<[Int32]>([])
    let start = DispatchSemaphore(value: 0)
    let connected = DispatchSemaphore(value: 0)
    let workers = (0..<threads).map { _ in
        TestThread {
            let backends = try! IntegrationBackends()
            defer { withExtendedLifetime(backends) {} }
            let repository = backends.repository(shared)
            connected.signal()
            start.wait()
            for _ in 0..<readsPerThread {
                let version = (try? repository.read(id: id))?.version ?? -1
                versions.withLock { $0.append(version) }
            }
        }
    }
    for _ in 0..<threads { connected.wait() }  // every thread connected before the gun
    for _ in 0..<threads { start.signal() }
    workers.forEach { $0.join() }
    return versions.withLock { $0 }
}
