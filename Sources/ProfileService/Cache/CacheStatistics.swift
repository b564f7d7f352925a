import Synchronization

/// What the cache protocol did, counted per event since start. Read by `/metrics` and tests.
public final class CacheStatistics: Sendable {
    public enum Event: Int, CaseIterable, Sendable {
        /// A read answered from memcached.
        case hit
        /// A read that found no usable entry.
        case miss
        /// A read whose entry was older than its `min_version`, answered from PostgreSQL.
        case bypass
        /// A memcached failure on a read (the read went to PostgreSQL).
        case error
        /// A reader found another reader's lease and waited.
        case leaseWait
        /// A profile read from PostgreSQL.
        case databaseRead
        /// Coalesced: a read that shared another read's PostgreSQL result in this process.
        case coalesced
        case populateStored
        /// The populate's lease was replaced (a write) or removed (an eviction) meanwhile.
        case populateLost
        /// No lease could be taken, so the row was not stored.
        case populateSkipped
        case writeThroughStored
        case writeThroughSkippedNewer
        case writeThroughCASConflict
        case writeThroughDeleted
        case writeThroughFailed
        /// A node that missed writes while unreachable was flushed before use.
        case nodeFlushed
    }

    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    private let counters: [Counter] = Event.allCases.map { _ in Counter() }

    public init() {}

    func record(_ event: Event) {
        counters[event.rawValue].value.add(1, ordering: .relaxed)
    }

    public func count(_ event: Event) -> Int {
        counters[event.rawValue].value.load(ordering: .relaxed)
    }

    /// Every counter, for snapshots in tests and metrics.
    public var snapshot: [Event: Int] {
        Dictionary(uniqueKeysWithValues: Event.allCases.map { ($0, count($0)) })
    }
}
