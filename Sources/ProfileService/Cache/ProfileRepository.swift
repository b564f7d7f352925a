import Glibc
public import Logging
public import MemcachedClient

/// Reads and writes profiles through memcached with the cache protocol of docs/design.md §2.
///
/// The protocol has three parts, one file each:
/// - read and populate (`ProfileRepository+Read.swift`): a hit answers from the entry's stored
///   JSON; a miss takes a lease *before* reading PostgreSQL and stores the row with `cas`
///   against it, so a write or an eviction in between makes the late populate fail.
/// - write-through (`ProfileRepository+WriteThrough.swift`): after a commit, the writer brings
///   the entry up to its version without ever moving it backwards, for its own speed.
/// - refresh (`ProfileRepository+Refresh.swift`): after a change the writer could not write
///   through — a commit seen on the change feed, a 409, an update whose outcome is unknown —
///   the entry is brought up to the committed version or invalidated.
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
        /// The profile's JSON in both views; an answer sends the view of who asks (§13).
        public var json: ProfileJSON
        public var cacheOutcome: CacheOutcome

        /// The entity tag of `view` (``ProfileJSON/entityTag(version:view:)``).
        public func entityTag(_ view: ProfileView) -> String { json.entityTag(version: version, view: view) }
    }

    public enum WriteThroughOutcome: String, Sendable {
        case stored, skippedNewer, deleted, failed
    }

    let store: any ProfileStore
    /// Reads rows for misses from standbys when they can prove they are new enough (docs/design.md §8).
    let standby: (any StandbyReader)?
    /// The worker's memcached connection behind the shared circuit breaker (docs/design.md §5).
    let cache: CircuitBreakingCacheClient
    let shared: ProfileCacheShared
    let logger: Logger
    /// Lease tokens and TTL jitter, without a system call each (see ``SplitMix64``).
    var random = SplitMix64()
    /// Whether reads send their lease with their first lookup (this worker's recent misses).
    var readStrategy: ReadStrategy
    /// What a batch learned of an id before one read of it runs (docs/design.md §6): handed to
    /// that read explicitly (``read(id:minVersion:batched:)``), never kept by the repository.
    public enum BatchedRead {
        /// The read's first lookup, made in the batch's multi-get (``prefetch(ids:whileMissesAreCommon:)``).
        case prefetched(Prefetch)
        /// The read's answer, loaded with others' after the request arrived (``loadTogether(_:)``).
        case loaded(Result<Representation?, ProfileStoreError>)
    }

    /// What a batch's multi-get found for one id: the read's first look.
    public enum Prefetch {
        /// A cached profile, or the record that the profile does not exist (§2.6), decoded.
        case cached(Look)
        /// No entry at all: the read loads (a batch's misses load together, §2.7).
        case missing
        /// Its node failed the batch's multi-get: the read goes to PostgreSQL without waiting on
        /// the node a second time, as a read whose own look failed does.
        case failed(MemcachedError)

        /// Whether a read with this floor is answered without waiting on memcached again: a
        /// profile at the floor or newer, an absence without a floor (a floor reads PostgreSQL),
        /// or a failed node (the read goes to PostgreSQL).
        public func answers(minVersion: Int32?) -> Bool {
            switch self {
            case .cached(let look):
                switch look.entry {
                case .profile(let version, _, _)?: version >= minVersion ?? 0
                case .absent?: minVersion == nil
                case .lease?, .handle?, nil: false
                }
            case .failed: true
            case .missing: false
            }
        }

        var look: Look {
            switch self {
            case .cached(let look): look
            case .missing: Look(.miss, shape: 0)
            case .failed(let error): Look(.failure(error), shape: 0)
            }
        }
    }
    var configuration: ProfileCacheConfiguration { shared.configuration }
    var statistics: CacheStatistics { shared.statistics }

    public init(
        store: any ProfileStore, cache: any CacheClient, shared: ProfileCacheShared, logger: Logger,
        standby: (any StandbyReader)? = nil
    ) {
        self.store = store
        self.standby = standby
        self.cache = cache as? CircuitBreakingCacheClient ?? CircuitBreakingCacheClient(cache, breaker: shared.circuitBreaker)
        self.shared = shared
        self.logger = logger
        self.readStrategy = ReadStrategy(leaseFirstMissShare: shared.configuration.leaseFirstMissShare)
    }
}

extension ProfileRepository.Representation {
    init(_ profile: Profile, outcome: ProfileRepository.CacheOutcome) {
        self.init(version: profile.version, json: profile.json, cacheOutcome: outcome)
    }
}

@available(*, unavailable, message: "uses one worker thread's connections")
extension ProfileRepository: Sendable {}
