/// How profiles are kept in memcached.
public struct ProfileCacheConfiguration: Sendable {
    /// Prefix of every key; the id follows. Versioned so a new format can live beside the old.
    public var keyPrefix = "profile-service:v1:"
    /// The profile's declared fields, as this instance serves them: an entry of another shape is
    /// not this instance's to serve (``CacheEntry``).
    public var profileFields: ProfileFieldCatalog = .standard
    /// The shape of the entries this instance reads and writes.
    var entryShape: UInt32 { profileFields.shape }
    /// Lifetime of an entry; each store picks a value within ±``ttlJitter`` of it so that
    /// entries written together do not expire together.
    public var ttl: Duration = .seconds(300)
    public var ttlJitter = 0.1
    /// Lifetime of a reader's lease: long enough for one PostgreSQL read, short enough that a
    /// reader that died holding one delays nobody for long.
    public var leaseTTL: Duration = .seconds(2)
    /// How long a reader that finds another's lease waits before each new look; after the last
    /// one it reads PostgreSQL without populating.
    public var leaseWaits: [Duration] = [.milliseconds(2), .milliseconds(4), .milliseconds(8), .milliseconds(16)]
    /// How often a write-through retries after a CAS conflict before it deletes the key.
    public var writeThroughAttempts = 4
    /// How long a coalesced reader waits for the leader's PostgreSQL read; then it answers 503
    /// rather than read the row itself (docs/design.md §5). Bounds how long a request holds a
    /// worker waiting for another's read.
    public var coalescedWait: Duration = .milliseconds(500)
    /// How many readers of this process may wait for others' reads at once; beyond, 503 at once.
    /// The service sets half its workers, so a slow read of one hot id never holds them all.
    public var maximumCoalescedWaiters = Int.max
    /// The least time between two reads of one id that go past the cache for a floor
    /// (docs/design.md §2.1): a leader whose read would start sooner after the last one waits,
    /// and every floor read arriving meanwhile shares its read. A floor nothing can meet
    /// (`min_version=2147483647`) then costs at most one PostgreSQL read per id per interval,
    /// however many clients send it.
    public var floorReadSpacing: Duration = .milliseconds(2)
    /// Share of a worker's recent reads that missed above which a read sends its lease with its
    /// first lookup (``ReadStrategy``); 0: always, above 1: never.
    public var leaseFirstMissShare = 0.5

    public init() {}

    func key(for id: Int64) -> String { keyPrefix + String(id) }
    /// A handle's key: `profile-service:v1:handle:ada` (docs/design.md §12). Ids are digits, so
    /// no profile's key is ever a handle's.
    func key(for handle: ProfileHandle) -> String { keyPrefix + "handle:" + handle.key }

    func jitteredTTLSeconds(using random: inout some RandomNumberGenerator) -> Int {
        let seconds = Double(ttl.components.seconds)
        return max(1, Int((seconds * Double.random(in: (1 - ttlJitter)...(1 + ttlJitter), using: &random)).rounded()))
    }

    var leaseTTLSeconds: Int { max(1, Int(leaseTTL.components.seconds)) }
}

/// Points where tests hold a request to replay a race deterministically. Empty in production.
public struct ProfileCacheHooks: Sendable {
    /// Called by a populating reader after its lease is down, before its PostgreSQL read.
    public var beforeDatabaseRead: (@Sendable (Int64) -> Void)?
    /// Called by a populating reader after its PostgreSQL read, before it stores the row.
    public var afterDatabaseRead: (@Sendable (Int64) -> Void)?
    /// Called by a populating reader after its populate was sent, before its flight ends.
    public var afterPopulate: (@Sendable (Int64) -> Void)?
    /// Called by a reader about to wait for another reader's PostgreSQL read in this process.
    public var willFollow: (@Sendable (Int64) -> Void)?

    public init(
        afterDatabaseRead: (@Sendable (Int64) -> Void)? = nil, afterPopulate: (@Sendable (Int64) -> Void)? = nil,
        willFollow: (@Sendable (Int64) -> Void)? = nil, beforeDatabaseRead: (@Sendable (Int64) -> Void)? = nil
    ) {
        self.beforeDatabaseRead = beforeDatabaseRead
        self.afterDatabaseRead = afterDatabaseRead
        self.afterPopulate = afterPopulate
        self.willFollow = willFollow
    }
}
