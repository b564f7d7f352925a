import Dispatch
import Testing
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

/// 112 concurrent reads of a cold profile (its PostgreSQL read slowed by `shared`'s hook) all
/// answer version 1, and PostgreSQL is read once.
func expectAHerdSharesOneRead(_ shared: ProfileCacheShared, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let profile = try IntegrationBackends().seed()
    let versions = readHerd(of: profile.id, shared: shared)
    #expect(versions.count == 16 * 7, sourceLocation: sourceLocation)
    #expect(versions.allSatisfy { $0 == 1 }, sourceLocation: sourceLocation)
    #expect(shared.statistics.count(.databaseRead) == 1, "\(shared.statistics.snapshot)", sourceLocation: sourceLocation)
}
