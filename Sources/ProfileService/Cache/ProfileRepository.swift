import Glibc
public import Logging
import MemcachedClient

/// Reads and writes profiles through memcached with the consistency protocol of DESIGN.md §2.
///
/// - Reads: a hit is answered from the entry's stored JSON. A miss takes a lease (`add` of a
///   placeholder) *before* reading PostgreSQL and stores the row with `cas` against the lease,
///   so a write or an eviction in between makes the late populate fail instead of landing a
///   stale row. Concurrent misses of one id in this process share one PostgreSQL read.
/// - Writes: after commit, a write-through guarded by version (`gets`; absent → `add`; cached
///   version ≥ new → leave it; older or a lease → `cas`, retried), else `delete`.
///
/// One value per worker thread: it uses that thread's store and cache connections.
public final class ProfileRepository {
    /// Where a read's answer came from, for access logs and metrics.
    public enum CacheOutcome: String, Sendable {
        case hit, miss, bypass, error
    }

    /// A profile as the API sends it: its version and its JSON body.
    public struct Representation: Sendable {
        public var version: Int32
        public var json: [UInt8]
        public var cacheOutcome: CacheOutcome

        public var entityTag: String { "\"\(version)\"" }
    }

    public enum WriteThroughOutcome: String, Sendable {
        case stored, skippedNewer, deleted, failed
    }

    private let store: any ProfileStore
    private let cache: any CacheClient
    private let shared: ProfileCacheShared
    private let logger: Logger
    /// Lease tokens and TTL jitter, without a system call each (see ``SplitMix64``).
    private var random = SplitMix64()
    private var configuration: ProfileCacheConfiguration { shared.configuration }
    private var statistics: CacheStatistics { shared.statistics }

    public init(store: any ProfileStore, cache: any CacheClient, shared: ProfileCacheShared, logger: Logger) {
        self.store = store
        self.cache = CircuitBreakingCacheClient(cache, breaker: shared.circuitBreaker)
        self.shared = shared
        self.logger = logger
    }

    // MARK: Reads

    /// The profile with this id, never older than `minVersion` when PostgreSQL has that version.
    ///
    /// - Returns: `nil` when no such profile exists.
    /// - Throws: ``ProfileStoreError/unavailable`` when the answer needs PostgreSQL and it is down.
    public func read(id: Int64, minVersion: Int32? = nil) throws(ProfileStoreError) -> Representation? {
        let key = configuration.key(for: id)
        guard isCacheUsable(forKey: key) else {
            return try readDatabase(id: id, outcome: .error)
        }
        var waits = configuration.leaseWaits[...]
        while true {
            switch cache.get(key) {
            case .hit(let item):
                switch CacheEntry(decoding: item.value) {
                case .profile(let version, let json)?:
                    if let minVersion, version < minVersion {
                        statistics.record(.bypass)
                        return try bypass(id: id, cachedVersion: version)
                    }
                    statistics.record(.hit)
                    return Representation(version: version, json: Array(json), cacheOutcome: .hit)
                case .lease?:
                    // A reader of this process holds it: share its read rather than wait.
                    if let flight = shared.inFlight.existing(id) {
                        return try follow(flight, id: id)
                    }
                    if let wait = waits.popFirst() {
                        statistics.record(.leaseWait)
                        sleep(for: wait)
                        continue
                    }
                    statistics.record(.miss)
                    return try readDatabase(id: id, outcome: .miss)
                case nil:
                    // Written by another format version, or garbage: a miss, and replaced.
                    statistics.record(.miss)
                    return try load(id: id, key: key, replacingCAS: item.cas)
                }
            case .miss:
                statistics.record(.miss)
                return try load(id: id, key: key, replacingCAS: nil)
            case .failure(let error):
                statistics.record(.error)
                logger.debug("cache read failed", metadata: ["error": "\(error)"])
                return try readDatabase(id: id, outcome: .error)
            }
        }
    }

    /// A miss: coalesce with other readers of the id in this process, else populate under a lease.
    private func load(id: Int64, key: String, replacingCAS: UInt64?) throws(ProfileStoreError) -> Representation? {
        let flight: InFlightReads.Flight
        switch shared.inFlight.join(id) {
        case .follower(let leadersFlight):
            return try follow(leadersFlight, id: id)
        case .leader(let newFlight):
            flight = newFlight
        }

        var outcome = InFlightReads.Outcome.failed(.unavailable)
        defer { shared.inFlight.finish(id, flight: flight, outcome: outcome) }

        let leaseCAS = takeLease(key: key, replacingCAS: replacingCAS)
        flight.markReadStarted()
        let profile: Profile?
        do {
            statistics.record(.databaseRead)
            profile = try store.profile(id: id)
        } catch {
            outcome = .failed(error)
            // Deleting is always safe: at worst the next reader misses.
            if leaseCAS != nil { _ = cache.delete(key) }
            throw error
        }
        shared.hooks.afterDatabaseRead?(id)

        guard let profile else {
            outcome = .notFound
            if leaseCAS != nil { _ = cache.delete(key) }
            return nil
        }
        var populated = false
        if let leaseCAS {
            populated = populate(key: key, profile: profile, leaseCAS: leaseCAS) == .stored
            statistics.record(populated ? .populateStored : .populateLost)
        } else {
            statistics.record(.populateSkipped)
        }
        outcome = .found(profile, populated: populated)
        return Representation(profile, outcome: .miss)
    }

    /// Waits for another reader's PostgreSQL read in this process and uses it if it may.
    private func follow(_ flight: InFlightReads.Flight, id: Int64) throws(ProfileStoreError) -> Representation? {
        guard let outcome = flight.usableOutcome(timeout: configuration.coalescedWait) else {
            return try readDatabase(id: id, outcome: .miss)
        }
        statistics.record(.coalesced)
        switch outcome {
        case .found(let profile, _): return Representation(profile, outcome: .miss)
        case .notFound: return nil
        case .failed(let error): throw error
        }
    }

    /// Puts a lease where there is no entry (or replaces an undecodable one) and returns the
    /// lease's CAS value, or `nil` if another reader or a writer got there first.
    private func takeLease(key: String, replacingCAS: UInt64?) -> UInt64? {
        let token = UInt64.random(in: 1...UInt64.max, using: &random)
        let lease = CacheEntry.encodeLease(token: token)
        let ttl = configuration.leaseTTLSeconds
        let placed =
            if let replacingCAS {
                cache.cas(key, value: lease, cas: replacingCAS, flags: 0, expiration: ttl)
            } else {
                cache.add(key, value: lease, flags: 0, expiration: ttl)
            }
        guard case .stored = placed else { return nil }
        // `add` does not return the CAS value; read it back, and make sure the lease is ours.
        guard case .hit(let item) = cache.get(key), CacheEntry(decoding: item.value) == .lease(token: token) else {
            return nil
        }
        return item.cas
    }

    private func populate(key: String, profile: Profile, leaseCAS: UInt64) -> RefreshOutcome {
        let result = cache.cas(
            key, value: CacheEntry.encode(profile), cas: leaseCAS, flags: 0,
            expiration: configuration.jitteredTTLSeconds(using: &random))
        switch result {
        case .stored:
            return .stored
        case .exists, .notFound, .notStored:
            return .lost
        case .failure(let error):
            statistics.record(.error)
            logger.debug("cache populate failed", metadata: ["error": "\(error)"])
            return .failed
        }
    }

    /// The cached entry is older than the reader's `min_version`: answer from PostgreSQL and
    /// repair the entry with a guarded write-through.
    private func bypass(id: Int64, cachedVersion: Int32) throws(ProfileStoreError) -> Representation? {
        statistics.record(.databaseRead)
        guard let profile = try store.profile(id: id) else { return nil }
        if profile.version > cachedVersion { writeThrough(profile) }
        return Representation(profile, outcome: .bypass)
    }

    private func readDatabase(id: Int64, outcome: CacheOutcome) throws(ProfileStoreError) -> Representation? {
        statistics.record(.databaseRead)
        return try store.profile(id: id).map { Representation($0, outcome: outcome) }
    }

    // MARK: Writes

    /// The optimistic update, then a guarded write-through of the new version.
    public func updateDisplayName(id: Int64, to displayName: String, expectedVersion: Int32)
        throws(ProfileStoreError) -> ProfileUpdateOutcome
    {
        let outcome = try store.updateDisplayName(id: id, to: displayName, expectedVersion: expectedVersion)
        if case .updated(let profile) = outcome { writeThrough(profile) }
        return outcome
    }

    public func create(id: Int64, username: String, displayName: String) throws(ProfileStoreError) -> Profile {
        let profile = try store.create(id: id, username: username, displayName: displayName)
        writeThrough(profile)
        return profile
    }

    /// Brings the cache up to `profile` without ever moving it backwards.
    ///
    /// - An older profile entry is replaced with `cas` (retried on conflict): an entry that
    ///   lived through every write since it landed proves no newer version was acknowledged.
    /// - An equal or newer entry is left alone.
    /// - An empty slot, a reader's lease or an undecodable entry proves nothing: a newer version
    ///   may have been written through and evicted meanwhile, so storing `profile` there could
    ///   move the cache backwards. (DESIGN.md's "absent → add" has exactly that race; the soak
    ///   test found it.) The writer instead refreshes the slot like a reader: it puts a lease of
    ///   its own there, which also defeats any reader's late populate, reads the row from
    ///   PostgreSQL and stores it with `cas` against that lease.
    ///
    /// When none of that works the key is deleted; when the delete fails too, the node is marked
    /// to be flushed before this process uses it again.
    @discardableResult
    public func writeThrough(_ profile: Profile) -> WriteThroughOutcome {
        let key = configuration.key(for: profile.id)
        guard isCacheUsable(forKey: key) else {
            statistics.record(.writeThroughFailed)
            return .failed
        }
        attempts: for _ in 0..<configuration.writeThroughAttempts {
            let replacingCAS: UInt64?
            switch cache.get(key) {
            case .hit(let item):
                if case .profile(let cachedVersion, _)? = CacheEntry(decoding: item.value) {
                    if cachedVersion >= profile.version {
                        statistics.record(.writeThroughSkippedNewer)
                        return .skippedNewer
                    }
                    let entry = CacheEntry.encode(profile)
                    switch cache.cas(
                        key, value: entry, cas: item.cas, flags: 0, expiration: configuration.jitteredTTLSeconds(using: &random))
                    {
                    case .stored:
                        statistics.record(.writeThroughStored)
                        return .stored
                    case .exists, .notFound:
                        statistics.record(.writeThroughCASConflict)
                        continue attempts
                    case .notStored, .failure:
                        break attempts
                    }
                }
                replacingCAS = item.cas
            case .miss:
                replacingCAS = nil
            case .failure:
                break attempts
            }
            switch refresh(id: profile.id, key: key, replacingCAS: replacingCAS) {
            case .stored:
                statistics.record(.writeThroughStored)
                return .stored
            case .lost:
                statistics.record(.writeThroughCASConflict)
                continue attempts
            case .failed:
                break attempts
            }
        }
        switch cache.delete(key) {
        case .deleted, .notFound:
            statistics.record(.writeThroughDeleted)
            return .deleted
        case .failure(let error):
            statistics.record(.writeThroughFailed)
            logger.warning(
                "write-through and delete failed; the entry may be stale until its node is flushed",
                metadata: ["error": "\(error)"])
            if let server = cache.server(forKey: key) { shared.dirtyNodes.insert(server) }
            return .failed
        }
    }

    private enum RefreshOutcome {
        case stored, lost, failed
    }

    /// Stores the current row under a lease of the writer's own (see ``writeThrough(_:)``).
    private func refresh(id: Int64, key: String, replacingCAS: UInt64?) -> RefreshOutcome {
        guard let leaseCAS = takeLease(key: key, replacingCAS: replacingCAS) else { return .lost }
        statistics.record(.databaseRead)
        guard let row = try? store.profile(id: id) else {
            _ = cache.delete(key)  // always safe: at worst the next reader misses
            return .failed
        }
        switch populate(key: key, profile: row, leaseCAS: leaseCAS) {
        case .stored: return .stored
        case .lost: return .lost
        case .failed: return .failed
        }
    }

    // MARK: Helpers

    /// False while the key's node missed writes and cannot be flushed yet.
    private func isCacheUsable(forKey key: String) -> Bool {
        if shared.dirtyNodes.isEmpty { return true }
        guard let server = cache.server(forKey: key), shared.dirtyNodes.contains(server) else { return true }
        guard cache.flush(server: server) == nil else { return false }
        shared.dirtyNodes.remove(server)
        statistics.record(.nodeFlushed)
        logger.notice("flushed a memcached node that missed writes", metadata: ["node": "\(server)"])
        return true
    }

    private func sleep(for duration: Duration) {
        let nanoseconds = duration.totalNanoseconds
        var request = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        nanosleep(&request, nil)
    }
}

extension ProfileRepository.Representation {
    init(_ profile: Profile, outcome: ProfileRepository.CacheOutcome) {
        self.init(version: profile.version, json: profile.jsonBytes, cacheOutcome: outcome)
    }
}

@available(*, unavailable, message: "uses one worker thread's connections")
extension ProfileRepository: Sendable {}

/// The cache protocol's process-wide state, shared by every worker's ``ProfileRepository``.
public final class ProfileCacheShared: Sendable {
    public let configuration: ProfileCacheConfiguration
    public let statistics = CacheStatistics()
    public let hooks: ProfileCacheHooks
    /// Skips memcached nodes that keep failing; wraps every worker's cache client.
    public let circuitBreaker: NodeCircuitBreaker
    let inFlight = InFlightReads()
    let dirtyNodes = DirtyNodes()

    public init(
        configuration: ProfileCacheConfiguration = .init(), hooks: ProfileCacheHooks = .init(),
        circuitBreaker: NodeCircuitBreaker = NodeCircuitBreaker()
    ) {
        self.configuration = configuration
        self.hooks = hooks
        self.circuitBreaker = circuitBreaker
    }
}
