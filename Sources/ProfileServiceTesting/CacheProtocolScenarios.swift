import Dispatch
public import ProfileService
import Synchronization
import Testing
import TestSupport

/// One thread's backends — in memory (``InMemoryBackends``) or the real servers (the integration
/// tests' `IntegrationBackends`): what a cache-protocol scenario needs of them.
public protocol RepositoryBackends: AnyObject, SendableMetatype {
    associatedtype Store: ProfileStore
    init() throws
    /// The database without the cache: a write here is one the cache learns of only from the
    /// change feed (an operator's `UPDATE`, a writer between its commit and its write-through).
    var store: Store { get }
    func repository(_ shared: ProfileCacheShared, cache: (any CacheClient)?) -> ProfileRepository
    /// A new profile at version 1 with an id no other test uses, and no cache entry.
    func seed() throws -> Profile
    /// The version of the profile entry cached for `id`, `nil` when there is none.
    func cachedVersion(_ id: Int64, shared: ProfileCacheShared) -> Int32?
    /// Removes `id`'s entry, whatever it is (an eviction, a flush).
    func evict(_ id: Int64, shared: ProfileCacheShared)
}

extension InMemoryBackends: RepositoryBackends {}

/// How a scenario reads or writes its profile: alone — a batch of one — or in one batch with
/// other profiles (a list, a batch lane's misses, writes made together). Every step of the cache
/// protocol is one code path for both, and every scenario runs both ways.
public enum Batching: String, CaseIterable, Sendable {
    case alone
    case withOthers

    /// Other profiles, at version 1 and not cached, for the batches to take with the scenario's:
    /// none alone.
    func others<Backends: RepositoryBackends>(_ backends: Backends, count: Int = 2) throws -> [Int64] {
        self == .alone ? [] : try (0..<count).map { _ in try backends.seed().id }
    }

    /// Reads `id` — alone, or first in a list with `others` — and returns its answer.
    func read(
        _ repository: ProfileRepository, _ id: Int64, minVersion: Int32? = nil, others: [Int64]
    ) throws(ProfileStoreError) -> ProfileRepository.Representation? {
        guard self == .withOthers else { return try repository.read(id: id, minVersion: minVersion) }
        let list = ProfileListRequest(members: [.init(id: id, floor: minVersion)] + others.map { .init(id: $0) })
        return try repository.read(list)[0]
    }

    /// Makes `writes` as a batch of requests would: each alone, or together when there are several.
    func update(_ writes: [ProfileUpdate], with writer: ProfileRepository) -> [Result<ProfileUpdateOutcome, ProfileStoreError>] {
        let together = self == .withOthers ? writer.writeTogetherInOrder(writes) : writes.map { _ in nil }
        return zip(writes, together).map { write, made in
            Result { () throws(ProfileStoreError) in try writer.update(write, madeTogether: made) }
        }
    }
}

/// The cache protocol's scenarios that run twice: in memory, in the unit tests' fast loop, and
/// once more on the real servers (ProfileServiceIntegrationTests), so the in-memory cluster is held to what
/// memcached and PostgreSQL really do (docs/design.md §2.1).
public enum CacheProtocolScenarios {
    /// `threads` threads, each with its own backends, read `id` `readsPerThread` times, all
    /// starting together; returns every version read (-1 for a failed read).
    public static func readHerd<Backends: RepositoryBackends>(
        _: Backends.Type, of id: Int64, shared: ProfileCacheShared, threads: Int = 16, readsPerThread: Int = 7,
        _ batching: Batching = .alone, others: [Int64] = []
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
                    let version = (try? batching.read(repository, id, others: others))?.version ?? -1
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
    /// answer version 1, and PostgreSQL reads it once — each other profile of the batches too.
    public static func expectAHerdSharesOneRead<Backends: RepositoryBackends>(
        _ backends: Backends.Type, _ shared: ProfileCacheShared, _ batching: Batching
    ) throws {
        let seeder = try Backends()
        let profile = try seeder.seed()
        let others = try batching.others(seeder)
        let versions = readHerd(backends, of: profile.id, shared: shared, batching, others: others)
        #expect(versions.count == 16 * 7)
        #expect(versions.allSatisfy { $0 == 1 })
        #expect(shared.statistics.count(.databaseRead) == 1 + others.count, "\(shared.statistics.snapshot)")
    }

    /// The stale-set race: a reader held between its PostgreSQL read and its populate while a
    /// writer commits and writes through; the late populate must not land. In a list, the raced
    /// member's populate loses and the others' land; the misses are read with one query (§2.7).
    public static func lateReaderDoesNotOverwriteTheWritersVersion<Backends: RepositoryBackends>(
        _: Backends.Type, _ batching: Batching
    ) throws {
        let race = try StaleSetRace<Backends>()
        let others = try batching.others(race.backends)
        let read = race.run { repository, id in [try? batching.read(repository, id, others: others)].map { $0??.version } }
        #expect(read == [1], "the reader began before the write: version 1 is a fair answer")
        #expect(race.cachedVersion(race.written.id) == 2, "the late populate must not land")
        for other in others { #expect(race.cachedVersion(other) == 1, "the other members were populated") }
        #expect(race.shared.statistics.count(.databaseBatchRead) == (others.isEmpty ? 0 : 1), "the misses in one query")
        #expect(race.shared.statistics.count(.populateLost) == 1)
        #expect(race.shared.statistics.count(.populateStored) == others.count)
    }

    /// The same race for reads loaded together (the batch lane's misses, docs/design.md §9): the
    /// leases go down in one round trip, the rows come from one query, the populates go in one
    /// round trip — and the late populate of the raced id still loses to the writer's version.
    public static func aLoadTogethersLatePopulateDoesNotOverwriteTheWritersVersion<Backends: RepositoryBackends>(
        _: Backends.Type, _ batching: Batching
    ) throws {
        let race = try StaleSetRace<Backends>()
        let others = try batching.others(race.backends, count: 3)
        let read = race.run { repository, id in
            let ids = [id] + others
            let loaded = repository.loadTogether(ids.map { .init(id: $0) })
            return ids.map { id in
                (try? repository.read(id: id, minVersion: nil, batched: loaded[id].map { .loaded($0) }))??.version
            }
        }
        #expect(read == Array(repeating: 1, count: 1 + others.count), "the reads began before the write: version 1 is a fair answer")
        #expect(race.cachedVersion(race.written.id) == 2, "the late populate must not land")
        for other in others { #expect(race.cachedVersion(other) == 1, "the others were populated") }
        #expect(race.shared.statistics.count(.databaseBatchRead) == (others.isEmpty ? 0 : 1), "every miss in one query")
        #expect(race.shared.statistics.count(.populateLost) == 1)
        #expect(race.shared.statistics.count(.populateStored) == others.count)
    }

    /// Updates made together (docs/design.md §9.4), each answered as if alone: a cached profile
    /// and an uncached one are updated in the one statement and written through; a stale version
    /// and a second write of the same id in the batch go alone and answer 409; a missing id 404.
    public static func writesMadeTogetherAnswerEachAsAlone<Backends: RepositoryBackends>(
        _: Backends.Type, _ batching: Batching
    ) throws {
        let shared = ProfileCacheShared()
        let backends = try Backends()
        let cached = try backends.seed()
        let cold = try backends.seed()
        let stale = try backends.seed()
        let writer = backends.repository(shared, cache: nil)
        _ = try writer.read(id: cached.id)
        _ = try writer.read(id: stale.id)
        let missing = cold.id + 1
        let writes = [
            ProfileUpdate(id: cached.id, displayName: "Cached 2", expectedVersion: 1),
            ProfileUpdate(id: cold.id, displayName: "Cold \"2\" \\ NULL, {x}", expectedVersion: 1),
            ProfileUpdate(id: stale.id, displayName: "Stale", expectedVersion: 7),
            ProfileUpdate(id: cached.id, displayName: "Cached again", expectedVersion: 1),
            ProfileUpdate(id: missing, displayName: "Nobody", expectedVersion: 1),
        ]
        let outcomes = batching.update(writes, with: writer)
        guard case .success(.updated(let first)) = outcomes[0], case .success(.updated(let second)) = outcomes[1] else {
            Issue.record("not updated: \(outcomes)")
            return
        }
        #expect(first.version == 2 && first.displayName == "Cached 2")
        #expect(second.version == 2 && second.displayName == writes[1].changes.displayName, "the name arrives as sent")
        #expect(outcomes[2] == .success(.versionMismatch(current: stale)))
        #expect(outcomes[3] == .success(.versionMismatch(current: first)), "the batch's write came first")
        #expect(outcomes[4] == .success(.notFound))
        #expect(backends.cachedVersion(cached.id, shared: shared) == 2)
        #expect(backends.cachedVersion(cold.id, shared: shared) == 2)
        #expect(shared.statistics.count(.writeThroughStored) == 2, "\(shared.statistics.snapshot)")
        #expect(shared.statistics.count(.writeThroughCASConflict) == 0)
        let reader = backends.repository(shared, cache: nil)
        #expect(try reader.read(id: cold.id).map { [$0.version, $0.cacheOutcome == .hit ? 1 : 0] } == [2, 1])
        #expect(try reader.read(id: stale.id)?.version == 1)
    }

    /// The stale-set race with the writer's version made together with another write: the
    /// reader's late populate of version 1 must not replace the batch's version 2.
    public static func aLateReaderDoesNotOverwriteAVersionWrittenTogether<Backends: RepositoryBackends>(
        _: Backends.Type, _ batching: Batching
    ) throws {
        let race = try StaleSetRace<Backends>()
        let other = try race.backends.seed()
        let read = race.run(
            { repository, id in [try? repository.read(id: id)].map { $0??.version } },
            write: { writer, id in
                let writes = [
                    ProfileUpdate(id: id, displayName: "Writer", expectedVersion: 1),
                    ProfileUpdate(id: other.id, displayName: "Other", expectedVersion: 1),
                ]
                return try? batching.update(writes, with: writer)[0].get()
            })
        #expect(read == [1], "the reader began before the write: version 1 is a fair answer")
        #expect(race.cachedVersion(race.written.id) == 2, "the late populate must not land")
        #expect(race.cachedVersion(other.id) == 2)
        #expect(race.shared.statistics.count(.populateLost) == 1)
    }
}

extension CacheProtocolScenarios {
    /// The stale-set race with a deletion (`DELETE /users/profile/{id}`): a reader read the row
    /// before the deletion and populates after it. The deletion took the reader's lease with the
    /// entry, so the populate does not land, and the profile does not come back.
    public static func aReadFromBeforeADeletionDoesNotBringTheProfileBack<Backends: RepositoryBackends>(
        _: Backends.Type, _ batching: Batching
    ) throws {
        let race = try StaleSetRace<Backends>()
        let others = try batching.others(race.backends)
        let id = race.written.id
        let shared = race.shared
        let answered = race.run({ repository, id in [(try? batching.read(repository, id, others: others))?.version] }, beside: { deleter, id in
            #expect((try? deleter.delete(id: id, expectedVersion: nil)) == .deleted(version: 1))
        })
        #expect(answered == [1], "the read began before the deletion: version 1 is a fair answer")
        #expect((race.cachedVersion(id) ?? 0) == 0, "the late populate must not land")
        let reader = race.backends.repository(shared, cache: nil)
        #expect(try batching.read(reader, id, others: others) == nil, "404 after the deletion")
        #expect(try batching.read(reader, id, minVersion: 1, others: others) == nil)
    }
}

/// Monotonic reads (docs/design.md §2.9): once any request was answered version N, no request
/// that begins after that answer is answered anything older — whoever asks, through whichever
/// instance. Each scenario forces one interleaving in which a row read from PostgreSQL was
/// answered while an older reader's lease still stood, so that reader's late populate landed
/// below it and the next read was a hit on the older version.
extension CacheProtocolScenarios {
    /// A reader of another instance finds a lease whose reader is slow, waits its lease waits out,
    /// reads PostgreSQL (version 2, committed behind the cache) and answers it. The lease's reader
    /// read version 1 before that commit; its populate must not land afterwards.
    public static func aReaderPastAnotherReadersLeaseLeavesNoOlderPopulateBehind<Backends: RepositoryBackends>(
        _: Backends.Type, _ batching: Batching
    ) throws {
        let stage = try MonotonicReadStage<Backends>(batching)
        let slow = stage.startReader(held: .afterDatabaseRead)
        try stage.commitBehindTheCache()
        let past = try stage.read(stage.instance())
        #expect(past?.version == 2, "the lease waits ran out: PostgreSQL answered")
        slow.finish()
        #expect(slow.answered == 1, "the slow reader began before the commit: version 1 is a fair answer")
        let next = try stage.read(stage.instance())
        #expect(next?.version == 2, "version 2 was answered before this read began")
        #expect(stage.cachedVersion() != 1, "the slow reader's populate of version 1 must not land")
    }

    /// A reader whose own populate lost (its lease was evicted and another reader leased the key
    /// again) answers the row it read — version 2 — only once the other reader's lease, taken
    /// before the commit, can no longer land version 1.
    public static func aLoadWhosePopulateLostLeavesNoOlderPopulateBehind<Backends: RepositoryBackends>(
        _: Backends.Type, _ batching: Batching
    ) throws {
        let stage = try MonotonicReadStage<Backends>(batching)
        let first = stage.startReader(held: .beforeDatabaseRead)
        stage.evict()
        let second = stage.startReader(held: .afterDatabaseRead)
        try stage.commitBehindTheCache()
        first.finish()
        #expect(first.answered == 2, "its read came after the commit")
        second.finish()
        #expect(second.answered == 1, "its read came before the commit: version 1 is a fair answer")
        let next = try stage.read(stage.instance())
        #expect(next?.version == 2, "version 2 was answered before this read began")
        #expect(stage.cachedVersion() != 1, "the second reader's populate of version 1 must not land")
    }

    /// Reads loaded together (the batch lane's misses, a list's) answer a member whose key holds
    /// another reader's lease from their one query; that reader's later populate must not land
    /// below what they answered.
    public static func aLoadTogetherPastAnotherReadersLeaseLeavesNoOlderPopulateBehind<Backends: RepositoryBackends>(
        _: Backends.Type, _ batching: Batching
    ) throws {
        let stage = try MonotonicReadStage<Backends>(batching)
        let id = stage.profile.id
        let slow = stage.startReader(held: .afterDatabaseRead)
        try stage.commitBehindTheCache()
        let together = stage.instance()
        let ids = [id] + stage.others
        let loaded = together.loadTogether(ids.map { .init(id: $0) })
        let answered = ids.map { id in
            (try? together.read(id: id, minVersion: nil, batched: loaded[id].map { .loaded($0) }))??.version
        }
        #expect(answered == [2] + stage.others.map { _ in 1 })
        slow.finish()
        #expect(slow.answered == 1, "the slow reader began before the commit: version 1 is a fair answer")
        let next = try stage.read(stage.instance())
        #expect(next?.version == 2, "version 2 was answered before this read began")
        #expect(stage.cachedVersion() != 1, "the slow reader's populate of version 1 must not land")
    }
}

/// The stage of a monotonic-read scenario: a profile at version 1, not cached, readers held at
/// a point of their load, and instances (each its own process-wide state) that read it.
struct MonotonicReadStage<Backends: RepositoryBackends> {
    enum HoldPoint { case beforeDatabaseRead, afterDatabaseRead }

    let backends: Backends
    let profile: Profile
    let batching: Batching
    /// The other profiles its batches read with ``profile``.
    let others: [Int64]

    init(_ batching: Batching) throws {
        backends = try Backends()
        profile = try backends.seed()
        self.batching = batching
        others = try batching.others(backends)
    }

    /// The profile as `repository` reads it, alone or in a batch with ``others``.
    func read(_ repository: ProfileRepository) throws(ProfileStoreError) -> ProfileRepository.Representation? {
        try batching.read(repository, profile.id, others: others)
    }

    /// A repository of a new instance: its own in-flight reads, so it shares nothing in process.
    func instance() -> ProfileRepository { backends.repository(ProfileCacheShared(), cache: nil) }

    func cachedVersion() -> Int32? { backends.cachedVersion(profile.id, shared: ProfileCacheShared()) }

    func evict() { backends.evict(profile.id, shared: ProfileCacheShared()) }

    /// Version 2, committed without the cache's knowledge.
    func commitBehindTheCache() throws {
        let outcome = try backends.store.updateDisplayName(id: profile.id, to: "Behind", expectedVersion: 1)
        guard case .updated(let updated) = outcome, updated.version == 2 else {
            Issue.record("the commit behind the cache failed: \(outcome)")
            return
        }
    }

    /// A reader of an instance of its own, on a thread of its own, held at `point` of its load
    /// of the profile; returns once it is held.
    func startReader(held point: HoldPoint) -> HeldReader {
        let gate = ReaderGate()
        gate.arm(profile.id)
        let hooks: ProfileCacheHooks = switch point {
        case .beforeDatabaseRead: .init(beforeDatabaseRead: gate.pause)
        case .afterDatabaseRead: .init(afterDatabaseRead: gate.pause)
        }
        let shared = ProfileCacheShared(hooks: hooks)
        let (id, batching, others) = (profile.id, batching, others)
        let reader = HeldReader(gate: gate) { () -> Int32? in
            let readerBackends = try! Backends()
            defer { withExtendedLifetime(readerBackends) {} }
            return (try? batching.read(readerBackends.repository(shared, cache: nil), id, others: others))??.version
        }
        gate.waitUntilPaused()
        return reader
    }
}

/// A reader held by a ``ReaderGate``: ``finish()`` lets it go on and waits for its answer.
final class HeldReader: Sendable {
    private let gate: ReaderGate
    private let answer = Mutex<Int32?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    init(gate: ReaderGate, _ read: @escaping @Sendable () -> Int32?) {
        self.gate = gate
        _ = TestThread { [self] in
            let version = read()
            answer.withLock { $0 = version }
            finished.signal()
        }
    }

    /// Releases the reader and waits until it has answered.
    func finish() {
        gate.release()
        finished.wait()
    }

    var answered: Int32? { answer.withLock { $0 } }
}

/// The stage of a stale-set race (docs/design.md §2.1): a profile at version 1, not cached, and a
/// reader that will be held right after its PostgreSQL read of it.
struct StaleSetRace<Backends: RepositoryBackends> {
    let gate = ReaderGate()
    let shared: ProfileCacheShared
    let backends: Backends
    let written: Profile

    init() throws {
        shared = ProfileCacheShared(hooks: .init(afterDatabaseRead: gate.pause))
        backends = try Backends()
        written = try backends.seed()
    }

    func cachedVersion(_ id: Int64) -> Int32? { backends.cachedVersion(id, shared: shared) }

    /// Runs `read` on a thread of its own (with backends of its own), holds it after its
    /// PostgreSQL read of ``written`` while a writer commits version 2 and writes it through, then
    /// lets it go on; returns the versions `read` answered.
    func run(
        _ read: @escaping @Sendable (ProfileRepository, Int64) -> [Int32?],
        write: (ProfileRepository, Int64) -> ProfileUpdateOutcome? = { writer, id in
            try? writer.updateDisplayName(id: id, to: "Writer", expectedVersion: 1)
        }
    ) -> [Int32?] {
        run(read, beside: { writer, id in
            let outcome = write(writer, id)
            if case .updated(let updated)? = outcome {
                #expect(updated.version == 2)
                #expect(cachedVersion(id) == 2, "the write-through replaced the lease")
            } else {
                Issue.record("update failed: \(String(describing: outcome))")
            }
        })
    }

    /// Runs `read` on a thread of its own (with backends of its own), holds it after its
    /// PostgreSQL read of ``written`` while `act` runs with a repository of its own, then lets it
    /// go on; returns the versions `read` answered.
    func run(
        _ read: @escaping @Sendable (ProfileRepository, Int64) -> [Int32?], beside act: (ProfileRepository, Int64) -> Void
    ) -> [Int32?] {
        let result = Mutex<[Int32?]>([])
        let shared = shared
        let id = written.id
        gate.arm(id)
        let reader = TestThread {
            let readerBackends = try! Backends()
            defer { withExtendedLifetime(readerBackends) {} }
            let answered = read(readerBackends.repository(shared, cache: nil), id)
            result.withLock { $0 = answered }
        }
        gate.waitUntilPaused()
        act(backends.repository(shared, cache: nil), id)
        gate.release()
        reader.join()
        return result.withLock { $0 }
    }
}

extension ProfileRepository {
    /// ``writeTogether(_:)``'s outcomes handed to the requests of `writes`, in their order, as a
    /// batch hands them: the first request of each id whose write was made gets its outcome.
    public func writeTogetherInOrder(_ writes: [ProfileUpdate]) -> [WrittenTogether?] {
        var made = writeTogether(writes)
        return writes.map { write in
            guard let written = made.removeValue(forKey: write.id), written.made(write) else { return nil }
            return written
        }
    }
}
