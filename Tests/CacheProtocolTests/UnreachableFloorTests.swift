import Synchronization
import Testing
import TestSupport
import ProfileServiceTesting

@testable import ProfileService

/// Floors nothing can meet (`min_version=2147483647`): a client can send them without limit, and
/// each must be answered from PostgreSQL (docs/design.md §2.1). Reads of one id past the cache are
/// spaced by ``ProfileCacheConfiguration/floorReadSpacing`` and shared, so a flood costs at most one
/// read per id per interval, for single reads and for lists alike.
@Suite struct UnreachableFloorTests {
    private static let spacing = Duration.milliseconds(5)

    /// Runs `body` on `threads` threads at once; returns how long they took together.
    private func together(threads: Int, _ body: @escaping @Sendable (Int) -> Void) -> Duration {
        let started = ContinuousClock.now
        let workers = (0..<threads).map { index in TestThread { body(index) } }
        workers.forEach { $0.join() }
        return started.duration(to: .now)
    }

    /// The most reads per id that spacing allows in `elapsed`: one per interval, plus the first.
    private func spacedReads(in elapsed: Duration) -> Int {
        1 + Int(elapsed / Self.spacing)
    }

    @Test func aFloodOfUnreachableFloorsCostsOneReadPerIntervalAndAnswersTheCurrentRow() throws {
        var configuration = ProfileCacheConfiguration()
        configuration.floorReadSpacing = Self.spacing
        let shared = ProfileCacheShared(configuration: configuration)
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        _ = try backends.repository(shared).read(id: profile.id)
        let readsBefore = shared.statistics.count(.databaseRead)
        let versions = Mutex<[Int32?]>([])
        let elapsed = together(threads: 16) { _ in
            let reader = try! InMemoryBackends()
            let repository = reader.repository(shared)
            for _ in 0..<25 {
                let version = (try? repository.read(id: profile.id, minVersion: .max))??.version
                versions.withLock { $0.append(version) }
            }
        }
        let reads = shared.statistics.count(.databaseRead) - readsBefore
        print("400 unreachable floors from 16 threads: \(reads) PostgreSQL reads in \(elapsed)")
        #expect(versions.withLock { $0 }.allSatisfy { $0 == 1 }, "the current row is the answer")
        #expect(reads <= spacedReads(in: elapsed), "at most one read per interval: \(reads) in \(elapsed)")
        #expect(reads < 400, "reads are shared")
    }

    @Test func listsOfUnreachableFloorsAreReadTogetherAndShareReads() throws {
        var configuration = ProfileCacheConfiguration()
        configuration.floorReadSpacing = Self.spacing
        let shared = ProfileCacheShared(configuration: configuration)
        let backends = try InMemoryBackends()
        let profiles = try (0..<10).map { _ in try backends.seed() }
        let warm = backends.repository(shared)
        for profile in profiles { _ = try warm.read(id: profile.id) }
        let readsBefore = shared.statistics.count(.databaseRead)
        let queriesBefore = shared.statistics.count(.databaseBatchRead)
        let list = ProfileListRequest(members: profiles.map { .init(id: $0.id, floor: .max) })
        let answers = Mutex<[[Int32?]]>([])
        let elapsed = together(threads: 8) { _ in
            let reader = try! InMemoryBackends()
            let repository = reader.repository(shared)
            for _ in 0..<10 {
                let versions = (try? repository.read(list))?.map { $0?.version } ?? []
                answers.withLock { $0.append(versions) }
            }
        }
        let reads = shared.statistics.count(.databaseRead) - readsBefore
        let queries = shared.statistics.count(.databaseBatchRead) - queriesBefore
        print("80 lists of 10 unreachable floors from 8 threads: \(reads) row reads in \(queries) queries, \(elapsed)")
        #expect(answers.withLock { $0 }.allSatisfy { $0 == Array(repeating: 1, count: 10) })
        #expect(reads <= profiles.count * spacedReads(in: elapsed), "at most one read per member per interval")
        #expect(queries >= 1, "a list's members below their floors are read with one query")
    }
}
