import Glibc
import PostgresClient
import ProfileServiceTesting
import Synchronization
import Testing
import TestSupport

@testable import ProfileService

/// Misses read from a standby (docs/design.md §8) on the in-memory backends: a standby answers
/// only once it has replayed a position of the primary taken after the read began, and only rows
/// at or above the read's floor. Each test has its own database, so the positions are its own.
@Suite struct StandbyReadTests {
    /// Backends, a standby that has replayed everything so far, and a repository reading from it.
    struct Setup {
        let database = InMemoryDatabase()
        let backends: InMemoryBackends
        let standby: InMemoryStandby
        let shared = ProfileCacheShared()
        let repository: ProfileRepository

        init() throws {
            backends = try InMemoryBackends(cluster: InMemoryCache(nodes: 2), database: database)
            standby = InMemoryStandby(of: database)
            repository = backends.repository(shared, standby: standby)
        }

        func seed() throws -> Profile {
            let profile = try backends.seed()
            standby.catchUp()
            return profile
        }

        func evict(_ id: Int64) { _ = backends.cache.delete(ProfileCacheEntries.key(for: id)) }

        func count(_ event: CacheStatistics.Event) -> Int { shared.statistics.count(event) }
    }

    @Test func aMissReadsTheStandbyThatReplayedEveryCommitBeforeItsLease() throws {
        let setup = try Setup()
        let profile = try setup.seed()
        let primaryReadsBefore = setup.database.reads

        #expect(try setup.repository.read(id: profile.id)?.version == 1)
        #expect(setup.standby.reads == 1)
        #expect(setup.database.reads == primaryReadsBefore, "no row read from the primary")
        #expect(setup.count(.standbyRead) == 1)
        #expect(setup.count(.databaseRead) == 0)
        #expect(setup.count(.primaryPosition) == 1)
        #expect(setup.backends.cachedVersion(profile.id, shared: setup.shared) == 1, "populated under its lease")
    }

    /// The stale populate a late standby would make: version 2 was written through and evicted;
    /// the standby still shows version 1. The read must answer 2 and leave 2 in the cache.
    @Test func aLateStandbyNeverPopulatesAVersionOlderThanOneTheCacheHeld() throws {
        let setup = try Setup()
        let profile = try setup.seed()
        guard case .updated(let updated) = try setup.repository.updateDisplayName(id: profile.id, to: "New", expectedVersion: 1)
        else { Issue.record("the update did not apply"); return }
        #expect(setup.backends.cachedVersion(profile.id, shared: setup.shared) == 2)
        setup.evict(profile.id)
        let primaryReads = setup.count(.databaseRead)  // the write-through's own, into an empty slot

        #expect(try setup.repository.read(id: profile.id)?.version == updated.version)
        #expect(setup.backends.cachedVersion(profile.id, shared: setup.shared) == 2, "the late standby's version 1 never landed")
        #expect(setup.standby.reads == 0)
        #expect(setup.count(.standbyBehind) == 1)
        #expect(setup.count(.databaseRead) == primaryReads + 1)

        // Caught up, the standby answers the next miss.
        setup.standby.catchUp()
        setup.evict(profile.id)
        #expect(try setup.repository.read(id: profile.id)?.version == 2)
        #expect(setup.standby.reads == 1)
        #expect(setup.count(.databaseRead) == primaryReads + 1)
    }

    /// A standby claiming more than it replayed: the floor rule alone keeps a writer's own read
    /// exact — an answer below the floor, or a 404 for a row the client has seen, comes from the primary.
    @Test func aFloorTheStandbysRowDoesNotMeetIsAnsweredByThePrimary() throws {
        let setup = try Setup()
        let profile = try setup.seed()
        setup.standby.claim(replayed: Int.max)
        _ = try setup.backends.store.updateDisplayName(id: profile.id, to: "Behind its back", expectedVersion: 1)
        let created = try setup.backends.seed()  // on the primary only

        #expect(try setup.repository.read(id: profile.id, minVersion: 2)?.version == 2)
        #expect(try setup.repository.read(id: created.id, minVersion: 1)?.version == 1, "never a 404 for a row that exists")
        #expect(setup.count(.standbyBelowFloor) == 2)
        #expect(setup.count(.databaseRead) == 2)
        #expect(setup.count(.standbyRead) == 0)
    }

    /// A floor above the cached entry (the client holds a version the cache has not caught up
    /// with): a standby that replayed it answers, and the entry is brought up to its row.
    @Test func aFloorAboveTheCachedEntryIsReadFromAStandbyThatHasIt() throws {
        let setup = try Setup()
        let profile = try setup.seed()
        _ = try setup.repository.read(id: profile.id)  // cached at version 1
        _ = try setup.backends.store.updateDisplayName(id: profile.id, to: "Behind its back", expectedVersion: 1)
        setup.standby.catchUp()
        let primaryReads = setup.count(.databaseRead)

        #expect(try setup.repository.read(id: profile.id, minVersion: 2)?.version == 2)
        #expect(setup.count(.databaseRead) == primaryReads, "answered by the standby")
        #expect(setup.count(.standbyRead) == 2)
        #expect(setup.backends.cachedVersion(profile.id, shared: setup.shared) == 2, "the entry brought up to the row")
    }

    @Test func withoutAUsableStandbyReadsGoToThePrimaryAndTakeNoPosition() throws {
        let setup = try Setup()
        let profile = try setup.seed()
        setup.standby.setUnavailable(true)

        #expect(try setup.repository.read(id: profile.id)?.version == 1)
        #expect(setup.count(.databaseRead) == 1)
        #expect(setup.count(.primaryPosition) == 0)
        #expect(setup.backends.cachedVersion(profile.id, shared: setup.shared) == 1, "populated from the primary's row")
    }

    /// A list's misses: one standby query; a member whose floor its row does not meet is read
    /// from the primary, the others are not.
    @Test func aListsMissesComeFromTheStandbyExceptFloorsItDoesNotMeet() throws {
        let setup = try Setup()
        let members = try (0..<3).map { _ in try setup.seed() }
        setup.standby.claim(replayed: Int.max)
        _ = try setup.backends.store.updateDisplayName(id: members[0].id, to: "Newer", expectedVersion: 1)
        let primaryReadsBefore = setup.database.reads

        let answers = try setup.repository.read(
            ProfileListRequest(members: [.init(id: members[0].id, floor: 2), .init(id: members[1].id), .init(id: members[2].id)]))
        #expect(answers.map { $0?.version } == [2, 1, 1])
        #expect(setup.count(.standbyRead) == 2)
        #expect(setup.count(.standbyBelowFloor) == 1)
        #expect(setup.database.reads - primaryReadsBefore == 1, "only the member below its floor read from the primary")
    }
}

/// The primary's positions that standby reads are proved against (docs/design.md §8).
@Suite struct PrimaryPositionsTests {
    @Test func aPositionTakenBeforeAReadBeganIsNeverUsedForIt() {
        let positions = PrimaryPositions()
        let samples = Atomic<UInt64>(0)
        func sample() -> LSN { LSN(rawValue: samples.add(1, ordering: .relaxed).newValue) }

        let began = ContinuousClock.now
        #expect(positions.position(after: began, timeout: .seconds(1), sample: sample) == LSN(rawValue: 1))
        #expect(positions.position(after: began, timeout: .seconds(1), sample: sample) == LSN(rawValue: 1), "shared: taken after the read began")
        #expect(samples.load(ordering: .relaxed) == 1)
        #expect(positions.position(after: .now, timeout: .seconds(1), sample: sample) == LSN(rawValue: 2), "a later read needs a later position")
    }

    /// 16 reads at once, each sample slow: every read gets a position whose sample began at or
    /// after the read did, and fewer samples are taken than reads.
    @Test func concurrentReadsShareSamplesTakenAfterEachOfThemBegan() {
        let positions = PrimaryPositions()
        let startedAt = Mutex<[UInt64: ContinuousClock.Instant]>([:])
        let samples = Atomic<UInt64>(0)
        let answers = Mutex<[(began: ContinuousClock.Instant, position: LSN?)]>([])
        let readers = (0..<16).map { reader in
            TestThread {
                usleep(UInt32(reader % 4) * 1000)
                let began = ContinuousClock.now
                let position = positions.position(after: began, timeout: .seconds(5)) { () throws(ProfileStoreError) -> LSN in
                    let now = ContinuousClock.now
                    let value = samples.add(1, ordering: .relaxed).newValue
                    startedAt.withLock { $0[value] = now }
                    usleep(5000)
                    return LSN(rawValue: value)
                }
                answers.withLock { $0.append((began, position)) }
            }
        }
        for reader in readers { reader.join() }
        let taken = samples.load(ordering: .relaxed)
        let all = answers.withLock { $0 }
        #expect(all.count == 16)
        #expect(all.allSatisfy { $0.position != nil })
        for answer in all {
            guard let position = answer.position, let sampled = startedAt.withLock({ $0[position.rawValue] }) else { continue }
            #expect(sampled >= answer.began, "a position sampled before the read began")
        }
        #expect(taken < 16, "\(taken) samples for 16 reads")
    }

    @Test func aFailedSampleGivesNoPosition() {
        let positions = PrimaryPositions()
        let position = positions.position(after: .now, timeout: .seconds(1)) { () throws(ProfileStoreError) -> LSN in
            throw .unavailable
        }
        #expect(position == nil)
    }
}
