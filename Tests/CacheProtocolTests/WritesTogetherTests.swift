import MemcachedClient
import ProfileServiceTesting
import Testing

@testable import ProfileService

/// Updates made together (docs/design.md §9.4): one statement, the looks beside it, one round
/// trip of `cas`es — and every request answered as a single write would be.
@Suite(.serialized) struct WritesTogetherTests {
    /// What a batch costs, in order: its looks travel beside its one statement, the uncached
    /// rows are read again in one query, the `cas`es go in one round trip — and answering the
    /// requests afterwards touches neither server.
    @Test func aBatchCostsOneStatementOneLookOneReadAndOneRoundOfCas() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profiles = try (0..<4).map { _ in try backends.seed() }
        for profile in profiles[..<2] { _ = try backends.repository(shared).read(id: profile.id) }
        let log = OperationLog()
        let writer = ProfileRepository(
            store: RecordingStore(backends.store, log: log), cache: RecordingCache(backends.cache, log: log), shared: shared,
            logger: InMemoryBackends.logger)
        let writes = profiles.map { ProfileUpdate(id: $0.id, displayName: "New \($0.id)", expectedVersion: 1) }

        let together = writer.writeTogetherInOrder(writes)
        #expect(log.entries == ["looks sent", "update together", "looks read", "read rows", "cas together"])
        log.entries = []
        let versions = try zip(writes, together).map { write, made in
            try writer.updateDisplayName(id: write.id, to: write.changes.displayName!, expectedVersion: 1, madeTogether: made).updatedVersion
        }
        #expect(log.entries == [], "every answer came from the batch")
        #expect(versions == [2, 2, 2, 2])
        for profile in profiles { #expect(backends.cachedVersion(profile.id, shared: shared) == 2) }
        #expect(shared.statistics.count(.writeThroughStored) == 4)
        #expect(shared.statistics.count(.databaseBatchWrite) == 1)
    }

    /// Without an outcome of ``ProfileRepository/writeTogether(_:)``, and for a request whose
    /// write the batch did not make (another name), an update is its own statement.
    @Test func aWriteTheBatchDidNotMakeGoesAlone() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let first = try backends.seed()
        let second = try backends.seed()
        let log = OperationLog()
        let writer = ProfileRepository(
            store: RecordingStore(backends.store, log: log), cache: backends.cache, shared: shared, logger: InMemoryBackends.logger)
        let writes = [first, second].map { ProfileUpdate(id: $0.id, displayName: "Batch", expectedVersion: 1) }

        _ = writer.writeTogether(writes)
        log.entries = []
        let outcome = try writer.updateDisplayName(id: first.id, to: "Another name", expectedVersion: 1)
        #expect(log.entries == ["update"], "its own statement (a conflict: the batch made version 2)")
        guard case .versionMismatch(let current) = outcome else { Issue.record("\(outcome)"); return }
        #expect(current.version == 2 && current.displayName == "Batch")
        // The batch's outcomes are gone with it.
        log.entries = []
        _ = try writer.updateDisplayName(id: second.id, to: "Batch", expectedVersion: 1)
        #expect(log.entries.first == "update")
    }

    /// The statement refused (a deadlock, say), nothing changed: each request makes its write alone.
    @Test func aRefusedStatementLeavesEachWriteToItsRequest() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profiles = try (0..<3).map { _ in try backends.seed() }
        let log = OperationLog()
        let writer = ProfileRepository(
            store: RefusingTogether(backends.store, log: log), cache: backends.cache, shared: shared,
            logger: InMemoryBackends.logger)
        let writes = profiles.map { ProfileUpdate(id: $0.id, displayName: "Alone", expectedVersion: 1) }

        let versions = try zip(writes, writer.writeTogetherInOrder(writes)).map { write, made in
            try writer.updateDisplayName(id: write.id, to: write.changes.displayName!, expectedVersion: 1, madeTogether: made).updatedVersion
        }
        #expect(versions == [2, 2, 2])
        #expect(log.entries.filter { $0 == "update" }.count == 3)
        for profile in profiles {
            #expect(backends.cachedVersion(profile.id, shared: shared) == 2)
            if case .hit(let item) = backends.cache.get(shared.configuration.key(for: profile.id)),
                case .lease? = CacheEntry(decoding: item.value, shape: ProfileFieldCatalog.standard.shape)
            {
                Issue.record("a lease of the refused batch was left behind")
            }
        }
    }

    /// PostgreSQL unavailable (or the connection lost around COMMIT): every request answers 503
    /// as a single write does, the entries are dropped (the versions may have committed), and no
    /// lease is left for readers to wait on.
    @Test func anUnknownOutcomeAnswersEveryRequestUnavailableAndDropsTheEntries() throws {
        let shared = ProfileCacheShared()
        let database = InMemoryDatabase()
        let backends = try InMemoryBackends(cluster: InMemoryCache(nodes: 2), database: database)
        let profiles = try (0..<3).map { _ in try backends.seed() }
        let writer = backends.repository(shared)
        _ = try writer.read(id: profiles[0].id)
        let writes = profiles.map { ProfileUpdate(id: $0.id, displayName: "Lost", expectedVersion: 1) }

        database.setUnavailable(true)
        let errors = zip(writes, writer.writeTogetherInOrder(writes)).map { write, made -> ProfileStoreError? in
            let outcome = Result { () throws(ProfileStoreError) in
                try writer.updateDisplayName(id: write.id, to: write.changes.displayName!, expectedVersion: 1, madeTogether: made)
            }
            if case .failure(let error) = outcome { return error }
            return nil
        }
        database.setUnavailable(false)
        #expect(errors == [ProfileStoreError.unavailable, .unavailable, .unavailable])
        for profile in profiles {
            #expect(backends.cachedVersion(profile.id, shared: shared) == nil, "no entry survives an unknown outcome")
            #expect(try backends.repository(shared).read(id: profile.id)?.version == 1)
        }
        #expect(shared.statistics.count(.leaseWait) == 0)
    }

    /// A memcached node failing: the batch's shared round trips fail (or are skipped by the
    /// circuit breaker), yet every write commits and answers, and each entry the healthy node
    /// holds is brought to the new version by its request's write-through alone.
    @Test func aFailedNodeLeavesEachWriteThroughToItsRequest() throws {
        let shared = ProfileCacheShared()
        let cluster = InMemoryCache(nodes: 2)
        let backends = try InMemoryBackends(cluster: cluster, database: InMemoryDatabase())
        // Random ids: with eight on two nodes, all on one happens one time in 128; seed until both have some.
        var profiles = try (0..<8).map { _ in try backends.seed() }
        let failed = cluster.server(forKey: shared.configuration.key(for: profiles[0].id))
        while profiles.count < 64, profiles.allSatisfy({ cluster.server(forKey: shared.configuration.key(for: $0.id)) == failed }) {
            profiles.append(try backends.seed())
        }
        for profile in profiles { _ = try backends.repository(shared).read(id: profile.id) }
        let healthy = profiles.filter { cluster.server(forKey: shared.configuration.key(for: $0.id)) != failed }
        try #require(!healthy.isEmpty)
        let writer = backends.repository(shared)
        let writes = profiles.map { ProfileUpdate(id: $0.id, displayName: "Through a failure", expectedVersion: 1) }

        cluster.fail(failed)
        let versions = try zip(writes, writer.writeTogetherInOrder(writes)).map { write, made in
            try writer.updateDisplayName(id: write.id, to: write.changes.displayName!, expectedVersion: 1, madeTogether: made).updatedVersion
        }
        cluster.heal(failed)
        #expect(versions == Array(repeating: 2, count: profiles.count))
        for profile in healthy { #expect(backends.cachedVersion(profile.id, shared: shared) == 2) }
    }

    /// A newer version written through between the batch's looks and its `cas`es: the batch's
    /// `cas` over the older entry loses, and its request's write-through, going on alone, leaves
    /// the newer version in place.
    @Test func aNewerWriteBetweenTheLooksAndTheCasesWins() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let raced = try backends.seed()
        let other = try backends.seed()
        for profile in [raced, other] { _ = try backends.repository(shared).read(id: profile.id) }
        let newer = backends.repository(shared)
        let store = AfterUpdateTogether(backends.store) {
            _ = try? newer.updateDisplayName(id: raced.id, to: "Newer", expectedVersion: 2)
        }
        let writer = ProfileRepository(store: store, cache: backends.cache, shared: shared, logger: InMemoryBackends.logger)
        let writes = [raced, other].map { ProfileUpdate(id: $0.id, displayName: "Batch", expectedVersion: 1) }

        let versions = try zip(writes, writer.writeTogetherInOrder(writes)).map { write, made in
            try writer.updateDisplayName(id: write.id, to: write.changes.displayName!, expectedVersion: 1, madeTogether: made).updatedVersion
        }
        #expect(versions == [2, 2])
        #expect(backends.cachedVersion(raced.id, shared: shared) == 3, "version 2 must not replace 3")
        #expect(backends.cachedVersion(other.id, shared: shared) == 2)
        #expect(shared.statistics.count(.writeThroughCASConflict) >= 1)
    }
}

/// Refuses every statement of several writes (returns nil: nothing changed).
private final class RefusingTogether: RecordingStore {
    override func updateProfiles(_ writes: [ProfileUpdate]) throws(ProfileStoreError) -> [Int64: Profile]? {
        log.entries.append("update together")
        return nil
    }
}

/// Runs `afterCommit` once, right after the first statement of several writes returns.
private final class AfterUpdateTogether: ForwardingProfileStore {
    private var afterCommit: (() -> Void)?

    init(_ base: any ProfileStore, afterCommit: @escaping () -> Void) {
        self.afterCommit = afterCommit
        super.init(base)
    }

    override func updateProfiles(_ writes: [ProfileUpdate]) throws(ProfileStoreError) -> [Int64: Profile]? {
        let updated = try base.updateProfiles(writes)
        let hook = afterCommit
        afterCommit = nil
        hook?()
        return updated
    }
}
