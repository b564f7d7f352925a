import Foundation
import MemcachedClient
import Synchronization
import Testing
import ProfileServiceTesting
import TestSupport

@testable import ProfileService

/// Writers, readers and an evictor on a few ids for a few seconds, in memory.
@Suite(.serialized) struct ProfileRepositoryConcurrencyTests {
    /// Highest acknowledged version per id, and the count of acknowledged writes.
    private final class Ledger: Sendable {
        private let state = Mutex<(acknowledged: [Int64: Int32], writes: [Int64: Int])>(([:], [:]))

        func floor(_ id: Int64) -> Int32 { state.withLock { $0.acknowledged[id] ?? 1 } }

        func acknowledge(_ id: Int64, version: Int32) {
            state.withLock {
                $0.acknowledged[id] = max($0.acknowledged[id] ?? 1, version)
                $0.writes[id, default: 0] += 1
            }
        }

        func writes(_ id: Int64) -> Int { state.withLock { $0.writes[id] ?? 0 } }
    }

    @Test func noReadAfterAnAcknowledgedWriteIsOlder() throws {
        let shared = ProfileCacheShared()
        let setup = try InMemoryBackends()
        let ids = try (0..<3).map { _ in try setup.seed().id }
        let ledger = Ledger()
        let violations = Mutex<[String]>([])
        let reads = Atomic<Int>(0)
        let deadline = Date().addingTimeInterval(4)

        var threads: [TestThread] = []
        for writer in 0..<3 {
            threads.append(
                TestThread {
                    let backends = try! InMemoryBackends()
                    defer { withExtendedLifetime(backends) {} }
                    let repository = backends.repository(shared)
                    var expected: [Int64: Int32] = Dictionary(uniqueKeysWithValues: ids.map { ($0, 1) })
                    var step = 0
                    while Date() < deadline {
                        let id = ids[(writer + step) % ids.count]
                        step += 1
                        switch try? repository.updateDisplayName(
                            id: id, to: "w\(writer)-\(step)", expectedVersion: expected[id]!)
                        {
                        case .updated(let profile)?:
                            ledger.acknowledge(id, version: profile.version)
                            expected[id] = profile.version
                        case .versionMismatch(let current)?:
                            expected[id] = current.version
                        default:
                            violations.withLock { $0.append("write of \(id) failed") }
                        }
                    }
                })
        }
        for reader in 0..<3 {
            threads.append(
                TestThread {
                    let backends = try! InMemoryBackends()
                    defer { withExtendedLifetime(backends) {} }
                    let repository = backends.repository(shared)
                    var step = 0
                    while Date() < deadline {
                        let id = ids[(reader + step) % ids.count]
                        step += 1
                        let floor = ledger.floor(id)  // taken before the read begins
                        let useToken = step % 2 == 0
                        let read = try? repository.read(id: id, minVersion: useToken ? floor : nil)
                        reads.add(1, ordering: .relaxed)
                        guard let version = read?.version, version >= floor else {
                            violations.withLock {
                                $0.append("read of \(id) returned \(String(describing: read?.version)) after \(floor)")
                            }
                            continue
                        }
                    }
                })
        }
        threads.append(
            TestThread {
                let backends = try! InMemoryBackends()
                while Date() < deadline {
                    for id in ids { _ = backends.cache.delete(shared.configuration.key(for: id)) }
                    usleep(3_000)
                }
            })
        threads.forEach { $0.join() }

        #expect(violations.withLock { $0 }.isEmpty, "\(violations.withLock { $0.prefix(5) })")
        #expect(reads.load(ordering: .relaxed) > 100)
        for id in ids {
            let row = try #require(try setup.store.profile(id: id))
            #expect(Int(row.version) - 1 == ledger.writes(id), "every acknowledged write is counted in the row")
            if let cached = setup.cachedVersion(id, shared: shared) {
                #expect(cached == row.version, "once writes stop, the cached entry equals the row")
            }
            // Whatever is cached now, a read returns the row's version.
            #expect(try setup.repository(shared).read(id: id)?.version == row.version)
        }
        let stats = shared.statistics.snapshot
        #expect(stats[.writeThroughStored, default: 0] > 0)
        #expect(stats[.populateStored, default: 0] > 0)
    }
}
