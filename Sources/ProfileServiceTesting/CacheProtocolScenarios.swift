import Dispatch
public import ProfileService
import Synchronization
import Testing
import TestSupport

/// One thread's backends — in memory (``InMemoryBackends``) or the real servers (the integration
/// tests' `IntegrationBackends`): what a cache-protocol scenario needs of them.
public protocol RepositoryBackends: AnyObject, SendableMetatype {
    init() throws
    func repository(_ shared: ProfileCacheShared, cache: (any CacheClient)?) -> ProfileRepository
    /// A new profile at version 1 with an id no other test uses, and no cache entry.
    func seed() throws -> Profile
    /// The version of the profile entry cached for `id`, `nil` when there is none.
    func cachedVersion(_ id: Int64, shared: ProfileCacheShared) -> Int32?
}

extension InMemoryBackends: RepositoryBackends {}

/// The cache protocol's scenarios that run twice: in memory, in the unit tests' fast loop, and
/// once more on the real servers (ProfileServiceIntegrationTests), so the in-memory cluster is held to what
/// memcached and PostgreSQL really do (docs/design.md §2.1).
public enum CacheProtocolScenarios {
    /// `threads` threads, each with its own backends, read `id` `readsPerThread` times, all
    /// starting together; returns every version read (-1 for a failed read).
    public static func readHerd<Backends: RepositoryBackends>(
        _: Backends.Type, of id: Int64, shared: ProfileCacheShared, threads: Int = 16, readsPerThread: Int = 7
    ) -> [Int32] {
        let versions = Mutex<[Int32]>([])
        let start = DispatchSemaphore(value: 0)
        let connected = DispatchSemaphore(value: 0)
        let workers = (0..<threads).map { _ in
            TestThread {
                let backends = try! Backends()
                defer { withExtendedLifetime(backends) {} }
                let repository = backends.repository(shared, cache: nil)
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
    public static func expectAHerdSharesOneRead<Backends: RepositoryBackends>(
        _ backends: Backends.Type, _ shared: ProfileCacheShared
    ) throws {
        let profile = try Backends().seed()
        let versions = readHerd(backends, of: profile.id, shared: shared)
        #expect(versions.count == 16 * 7)
        #expect(versions.allSatisfy { $0 == 1 })
        #expect(shared.statistics.count(.databaseRead) == 1, "\(shared.statistics.snapshot)")
    }

    /// The stale-set race: a reader held between its PostgreSQL read and its populate while a
    /// writer commits and writes through; the late populate must not land.
    public static func lateReaderDoesNotOverwriteTheWritersVersion<Backends: RepositoryBackends>(
        _: Backends.Type
    ) throws {
        let gate = ReaderGate()
        let shared = ProfileCacheShared(hooks: .init(afterDatabaseRead: gate.pause))
        let backends = try Backends()
        let profile = try backends.seed()
        let writer = backends.repository(shared, cache: nil)

        let result = Mutex<ProfileRepository.Representation?>(nil)
        gate.arm(profile.id)
        let reader = TestThread {
            let readerBackends = try! Backends()
            defer { withExtendedLifetime(readerBackends) {} }
            let read = try? readerBackends.repository(shared, cache: nil).read(id: profile.id)
            result.withLock { $0 = read }
        }
        gate.waitUntilPaused()
        let outcome = try? writer.updateDisplayName(id: profile.id, to: "Writer", expectedVersion: 1)
        if case .updated(let updated)? = outcome {
            #expect(updated.version == 2)
            #expect(backends.cachedVersion(profile.id, shared: shared) == 2, "the write-through replaced the lease")
        } else {
            Issue.record("update failed: \(String(describing: outcome))")
        }
        gate.release()
        reader.join()

        #expect(result.withLock { $0 }?.version == 1, "the reader began before the write: version 1 is a fair answer")
        #expect(backends.cachedVersion(profile.id, shared: shared) == 2, "the late populate must not land")
        #expect(shared.statistics.count(.populateLost) == 1)
        #expect(shared.statistics.count(.populateStored) == 0)
    }

    /// The stale-set race for a list's misses, loaded with one query (docs/design.md §2.7): the
    /// list's reader is held after the query, before it populates, while a writer commits a
    /// member and writes it through; that member's late populate must not land, the other's does.
    public static func aListsLateLoadDoesNotOverwriteTheWritersVersion<Backends: RepositoryBackends>(
        _: Backends.Type
    ) throws {
        let gate = ReaderGate()
        let shared = ProfileCacheShared(hooks: .init(afterDatabaseRead: gate.pause))
        let backends = try Backends()
        let written = try backends.seed()
        let other = try backends.seed()
        let writer = backends.repository(shared, cache: nil)

        let result = Mutex<[Int32?]>([])
        gate.arm(written.id)
        let reader = TestThread {
            let readerBackends = try! Backends()
            defer { withExtendedLifetime(readerBackends) {} }
            let list = ProfileListRequest(members: [.init(id: written.id), .init(id: other.id)])
            let read = try? readerBackends.repository(shared, cache: nil).read(list)
            result.withLock { $0 = read?.map { $0?.version } ?? [] }
        }
        gate.waitUntilPaused()
        let outcome = try? writer.updateDisplayName(id: written.id, to: "Writer", expectedVersion: 1)
        guard case .updated? = outcome else {
            Issue.record("update failed: \(String(describing: outcome))")
            gate.release()
            reader.join()
            return
        }
        gate.release()
        reader.join()

        #expect(result.withLock { $0 } == [1, 1], "the list began before the write: version 1 is a fair answer")
        #expect(backends.cachedVersion(written.id, shared: shared) == 2, "the late populate must not land")
        #expect(backends.cachedVersion(other.id, shared: shared) == 1, "the other member was populated")
        #expect(shared.statistics.count(.databaseBatchRead) == 1, "both misses in one query")
        #expect(shared.statistics.count(.populateLost) == 1)
        #expect(shared.statistics.count(.populateStored) == 1)
    }
}
