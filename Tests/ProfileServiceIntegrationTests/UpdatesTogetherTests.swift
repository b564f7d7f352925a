import Foundation
import PostgresClient
import ProfileServiceTesting
import Synchronization
import Testing
import TestSupport

@testable import ProfileService

/// Several optimistic updates in one statement (`PostgresProfileStore.updateProfiles`,
/// docs/design.md §9.4), on the real PostgreSQL.
@Suite(.serialized, .requires(.postgres, .memcached)) struct UpdatesTogetherTests {
    let backends: IntegrationBackends

    init() throws {
        backends = try IntegrationBackends()
    }

    /// Names travel in an array literal: quotes, backslashes, commas, braces, `NULL` and
    /// non-ASCII text arrive as sent.
    @Test func namesArriveExactlyAsSent() throws {
        let names = [#"say "hi""#, #"back\slash"#, "NULL", "a, b", "{braces}", "Zoë 🐙", " spaced ", #"\""#]
        let profiles = try names.map { _ in try backends.seed() }
        let writes = zip(profiles, names).map { ProfileUpdate(id: $0.id, displayName: $1, expectedVersion: 1) }
        let updated = try #require(try backends.store.updateProfiles(writes))
        for (profile, name) in zip(profiles, names) {
            #expect(updated[profile.id]?.displayName == name)
            #expect(try backends.store.profile(id: profile.id)?.displayName == name)
        }
    }

    /// Patches and updates in one statement: a patch (no expected version) applies at whatever
    /// version is stored and leaves the name when it names none; each sets only the fields it
    /// names (`null` unsets); field values arrive exactly as sent, quotes and backslashes too.
    @Test func patchesAndFieldsAreMadeTogetherWithUpdates() throws {
        let moved = try backends.seed()
        _ = try backends.store.updateDisplayName(id: moved.id, to: "Moved on", expectedVersion: 1)
        let other = try backends.seed()
        let created = try backends.store.create(
            id: other.id + 1_000_000, username: "tog\(other.id % 10_000_000)", displayName: "Fields",
            fields: [.init(name: "location", value: "Lisbon"), .init(name: "website", value: "https://example.com")])
        let bio = #"a "quoted" bio\with a backslash, {braces} and NULL"#
        let updated = try #require(
            try backends.store.updateProfiles([
                ProfileUpdate(id: moved.id, changes: ProfileChanges(fields: [.init(name: "bio", value: bio)]), expectedVersion: nil),
                ProfileUpdate(id: other.id, displayName: "Named", expectedVersion: 1),
                ProfileUpdate(
                    id: created.id, changes: ProfileChanges(fields: [.init(name: "website", value: nil), .init(name: "bio", value: "x")]),
                    expectedVersion: 1),
            ]))
        #expect(updated[moved.id]?.version == 3 && updated[moved.id]?.displayName == "Moved on", "a patch at whatever version")
        #expect(updated[moved.id]?.fields["bio"] == bio)
        #expect(updated[other.id]?.displayName == "Named" && updated[other.id]?.fields["bio"] == nil)
        let fields = try #require(updated[created.id]?.fields)
        #expect(fields["location"] == "Lisbon" && fields["website"] == nil && fields["bio"] == "x")
        #expect(try backends.store.profile(id: moved.id) == updated[moved.id])
    }

    /// Only rows at their expected version change, all in one transaction (one `now()`); the
    /// others are left out of the answer and unchanged.
    @Test func onlyRowsAtTheirExpectedVersionChangeInOneTransaction() throws {
        let current = try (0..<3).map { _ in try backends.seed() }
        let moved = try backends.seed()
        _ = try backends.store.updateDisplayName(id: moved.id, to: "Moved on", expectedVersion: 1)
        let missing = moved.id + 1
        let writes =
            current.map { ProfileUpdate(id: $0.id, displayName: "Together", expectedVersion: 1) } + [
                ProfileUpdate(id: moved.id, displayName: "Stale", expectedVersion: 1),
                ProfileUpdate(id: missing, displayName: "Nobody", expectedVersion: 1),
            ]
        let updated = try #require(try backends.store.updateProfiles(writes))
        #expect(Set(updated.keys) == Set(current.map(\.id)))
        #expect(updated.values.allSatisfy { $0.version == 2 && $0.displayName == "Together" })
        #expect(Set(updated.values.map(\.updatedAt)).count == 1, "one transaction: one now()")
        #expect(try backends.store.profile(id: moved.id)?.displayName == "Moved on")
        #expect(try backends.store.profile(id: missing) == nil)
    }

    /// A statement the server refuses (here a version at the top of its range, whose next one
    /// cannot exist) changes nothing, and says so: each write is then made alone.
    @Test func aRefusedStatementChangesNothing() throws {
        let top = try backends.seed()
        try backends.connection.simpleQuery("UPDATE user_profiles SET version = 2147483647 WHERE id = \(top.id)")
        // Gone again without a tombstone (triggers off), or the next floor raised above every
        // version would overflow (VersionRulesTests).
        defer {
            _ = try? backends.connection.simpleQuery(
                "SET session_replication_role = replica; DELETE FROM user_profiles WHERE id = \(top.id); RESET session_replication_role")
        }
        let other = try backends.seed()
        let writes = [
            ProfileUpdate(id: other.id, displayName: "Lost with the batch", expectedVersion: 1),
            ProfileUpdate(id: top.id, displayName: "Overflow", expectedVersion: Int32.max),
        ]
        #expect(try backends.store.updateProfiles(writes) == nil)
        #expect(try backends.store.profile(id: other.id)?.version == 1, "rolled back with the statement")
    }

    /// A row another session holds locked (an operator's open transaction) is skipped, not
    /// waited for: the statement returns while the lock is held — with a wait it would run into
    /// the statement timeout and throw — having updated the other rows; the skipped write is
    /// left out of the answer, to be made alone.
    @Test func aRowLockedElsewhereIsSkippedNotWaitedFor() throws {
        let locked = try backends.seed()
        let free = try backends.seed()
        let operatorSession = try IntegrationBackends()
        try operatorSession.connection.simpleQuery("BEGIN")
        try operatorSession.connection.simpleQuery("UPDATE user_profiles SET display_name = 'psql' WHERE id = \(locked.id)")
        defer { _ = try? operatorSession.connection.simpleQuery("ROLLBACK") }
        let writes = [locked, free].map { ProfileUpdate(id: $0.id, displayName: "Together", expectedVersion: 1) }
        let updated = try #require(try backends.store.updateProfiles(writes))
        #expect(Set(updated.keys) == [free.id])
        try operatorSession.connection.simpleQuery("ROLLBACK")
        #expect(try backends.store.profile(id: locked.id)?.version == 1)
    }

    /// Two writers make overlapping batches in opposite orders, again and again: a statement
    /// skips rows the other holds, so neither is ever refused for a deadlock.
    @Test func overlappingBatchesInOppositeOrdersNeverDeadlock() throws {
        let ids = try (0..<12).map { _ in try backends.seed().id }
        let refusals = Tally()
        let updates = Tally()
        let start = DispatchSemaphore(value: 0)
        let writers = [ids, ids.reversed()].map { order in
            TestThread {
                let own = try! IntegrationBackends()
                let store = CountingRefusals(own.store, refusals: refusals)
                let repository = ProfileRepository(
                    store: store, cache: own.cache, shared: ProfileCacheShared(), logger: IntegrationBackends.logger)
                start.wait()
                for _ in 0..<40 {
                    // The versions as they are now: most writes of a round meet the other writer's.
                    guard let rows = try? own.store.profiles(ids: order) else { continue }
                    let writes = order.compactMap { id in
                        rows[id].map { ProfileUpdate(id: id, displayName: "w\(Int.random(in: 0..<1_000_000))", expectedVersion: $0.version) }
                    }
                    for (write, made) in zip(writes, repository.writeTogetherInOrder(writes)) {
                        if case .updated? = try? repository.update(write, madeTogether: made) {
                            updates.add()
                        }
                    }
                }
                withExtendedLifetime(own) {}
            }
        }
        start.signal()
        start.signal()
        writers.forEach { $0.join() }
        #expect(refusals.count == 0, "no statement refused (a deadlock would be)")
        #expect(updates.count >= 40 * 12, "every round updated every row at least once")
    }
}

final class Tally: Sendable {
    private let value = Atomic<Int>(0)
    var count: Int { value.load(ordering: .relaxed) }
    func add() { value.add(1, ordering: .relaxed) }
}

/// Counts the statements of several writes that the server refused.
private final class CountingRefusals: ForwardingProfileStore {
    let refusals: Tally

    init(_ base: any ProfileStore, refusals: Tally) {
        self.refusals = refusals
        super.init(base)
    }

    override func updateProfiles(_ writes: [ProfileUpdate]) throws(ProfileStoreError) -> [Int64: Profile]? {
        let updated = try base.updateProfiles(writes)
        if updated == nil { refusals.add() }
        return updated
    }
}
