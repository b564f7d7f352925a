import MemcachedClient
import Testing
import ProfileServiceTesting

@testable import ProfileService

/// The write-through's first look, taken beside the statement (docs/design.md §2.2): a lease
/// added where the key is free and the key read back, before the commit is known.
@Suite(.serialized) struct WriteLookTests {
    private func entry(_ id: Int64, _ backends: InMemoryBackends, _ shared: ProfileCacheShared) -> CacheEntry? {
        guard case .hit(let item) = backends.cache.get(shared.configuration.key(for: id)) else { return nil }
        return CacheEntry(decoding: item.value, shape: ProfileFieldCatalog.standard.shape)
    }

    /// What a write costs, in order: the look travels beside the statement, then one `cas` —
    /// and, for a profile memcached did not hold, one read of the row under the look's lease.
    @Test(arguments: [true, false])
    func aWriteSendsItsLookBeforeTheStatementAndReadsItAfter(cached: Bool) throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        if cached { _ = try backends.repository(shared).read(id: profile.id) }
        let log = OperationLog()
        let writer = ProfileRepository(
            store: RecordingStore(backends.store, log: log), cache: RecordingCache(backends.cache, log: log), shared: shared,
            logger: InMemoryBackends.logger)

        _ = try writer.updateDisplayName(id: profile.id, to: "New", expectedVersion: 1)
        let expected =
            cached
            ? ["look sent", "update", "look read", "cas"]
            : ["look sent", "update", "look read", "read row", "cas"]
        #expect(log.entries == expected)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 2)
    }

    @Test func aWriteToAnUncachedProfileStoresTheRowItReadUnderItsOwnLease() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let writer = backends.repository(shared)

        let outcome = try writer.updateDisplayName(id: profile.id, to: "New", expectedVersion: 1)
        guard case .updated(let updated) = outcome else { Issue.record("not updated: \(outcome)"); return }
        #expect(updated.version == 2)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 2)
        #expect(shared.statistics.count(.writeThroughStored) == 1)
        // The row is read once, after the lease the look put down; no second lease is taken.
        #expect(shared.statistics.count(.databaseRead) == 1)
        #expect(shared.statistics.count(.writeThroughCASConflict) == 0)
        #expect(try writer.read(id: profile.id)?.cacheOutcome == .hit)
    }

    @Test func aWriteToACachedProfileReplacesTheEntryTheLookFoundWithoutReadingPostgreSQL() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let writer = backends.repository(shared)
        _ = try writer.read(id: profile.id)
        let readsBefore = shared.statistics.count(.databaseRead)

        _ = try writer.updateDisplayName(id: profile.id, to: "New", expectedVersion: 1)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 2)
        #expect(shared.statistics.count(.databaseRead) == readsBefore)
        #expect(shared.statistics.count(.writeThroughStored) == 1)
    }

    @Test(arguments: ["conflict", "missing", "unavailable", "taken"])
    func aWriteThatFailsLeavesNoLeaseToHoldReadersBack(_ failure: String) throws {
        let shared = ProfileCacheShared()
        // A database of the test's own: it is made unavailable.
        let database = InMemoryDatabase()
        let backends = try InMemoryBackends(cluster: InMemoryCache(nodes: 2), database: database)
        let profile = try backends.seed()
        let writer = backends.repository(shared)
        var id = profile.id
        switch failure {
        case "conflict":
            #expect(throws: Never.self) {
                let outcome = try writer.updateDisplayName(id: profile.id, to: "Stale", expectedVersion: 7)
                #expect(outcome == .versionMismatch(current: profile))
            }
        case "missing":
            id = profile.id + 1
            let outcome = try writer.updateDisplayName(id: id, to: "Nobody", expectedVersion: 1)
            #expect(outcome == .notFound)
        case "unavailable":
            database.setUnavailable(true)
            defer { database.setUnavailable(false) }
            #expect(throws: ProfileStoreError.unavailable) {
                try writer.updateDisplayName(id: profile.id, to: "Lost", expectedVersion: 1)
            }
        default:
            #expect(throws: ProfileStoreError.self) {
                try writer.create(id: profile.id, username: "other\(profile.id)", displayName: "Again")
            }
        }
        if case .lease? = entry(id, backends, shared) {
            Issue.record("the look's lease was left behind after a failed write (\(failure))")
        }
        // A reader populates at once rather than wait on a lease nobody will fill.
        let read = try backends.repository(shared).read(id: id)
        #expect(read?.version == (failure == "missing" ? nil : 1))
        #expect(shared.statistics.count(.leaseWait) == 0)
    }

    /// A newer version committed and written through after this writer's look and commit, before
    /// its `cas`: the entry changed since the look, so the older version never lands.
    @Test func aNewerWriteBetweenTheLookAndTheCasWins() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let reader = backends.repository(shared)
        _ = try reader.read(id: profile.id)  // cached at version 1
        let other = backends.repository(shared)
        let store = AfterUpdate(backends.store) {
            // The first writer's UPDATE committed version 2; another commits 3 and writes it through.
            _ = try? other.updateDisplayName(id: profile.id, to: "Newer", expectedVersion: 2)
        }
        let writer = ProfileRepository(store: store, cache: backends.cache, shared: shared, logger: InMemoryBackends.logger)

        let outcome = try writer.updateDisplayName(id: profile.id, to: "Older", expectedVersion: 1)
        #expect(outcome.updatedVersion == 2)
        #expect(backends.cachedVersion(profile.id, shared: shared) == 3, "version 2 must not replace 3")
        #expect(shared.statistics.count(.writeThroughCASConflict) >= 1)
        #expect(try reader.read(id: profile.id)?.version == 3)
    }
}

/// Runs `afterCommit` once, right after the first update returns.
private final class AfterUpdate: ForwardingProfileStore {
    private var afterCommit: (() -> Void)?

    init(_ base: any ProfileStore, afterCommit: @escaping () -> Void) {
        self.afterCommit = afterCommit
        super.init(base)
    }

    override func update(id: Int64, changes: ProfileChanges, expectedVersion: Int32?)
        throws(ProfileStoreError) -> ProfileUpdateOutcome
    {
        let outcome = try base.update(id: id, changes: changes, expectedVersion: expectedVersion)
        let hook = afterCommit
        afterCommit = nil
        hook?()
        return outcome
    }
}

extension ProfileUpdateOutcome {
    var updatedVersion: Int32? {
        if case .updated(let profile) = self { profile.version } else { nil }
    }
}
