/// The memcached cluster an instance serves from and repairs (docs/design.md §3.10).
///
/// Every cluster needs every change: each has its own replication slot — so PostgreSQL keeps
/// the commit stream for each until that cluster's consumer has applied it — and its own
/// notification channel, on which its consumer says what it repaired. One instance of each
/// cluster consumes its slot; the others stand by, as within one cluster.
///
/// ```swift
/// let cluster = try CacheCluster("eu_west")
/// cluster.slotName             // "profile_service_cache_eu_west"
/// cluster.notificationChannel  // "profile_changes_eu_west"
/// CacheCluster.default.slotName  // "profile_service_cache", the slot of a single-cluster fleet
/// ```
public struct CacheCluster: Sendable, Hashable, CustomStringConvertible {
    /// Lowercase letters, digits and `_`, starting with a letter, at most ``maximumNameLength``:
    /// a slot name PostgreSQL accepts and a label Prometheus keeps as written.
    public let name: String

    /// The cluster of a fleet that names none: the slot and channel every version of the service
    /// used before clusters had names, so that a single-cluster fleet keeps its slot.
    public static let `default` = CacheCluster(unchecked: "default")

    public static let maximumNameLength = 32

    /// What a cluster's name may not be, said so that an operator can fix the flag.
    public struct InvalidName: Error, CustomStringConvertible {
        public let name: String
        public var description: String {
            "cache cluster name \"\(name)\" must be 1 to \(CacheCluster.maximumNameLength) lowercase letters, digits "
                + "or '_', starting with a letter (it names a replication slot)"
        }
    }

    public init(_ name: String) throws(InvalidName) {
        guard Self.isValidName(name) else { throw InvalidName(name: name) }
        self.name = name
    }

    private init(unchecked name: String) { self.name = name }

    public var description: String { name }

    /// The logical replication slot of this cluster's change feed.
    public var slotName: String { self == .default ? Self.slotPrefix : Self.slotPrefix + "_" + name }

    /// The channel this cluster's consumer notifies after repairing the cluster, and its
    /// instances listen on (docs/design.md §4).
    public var notificationChannel: String {
        self == .default ? Self.channelPrefix : Self.channelPrefix + "_" + name
    }

    /// The cluster whose slot `slotName` is, or nil for a slot of something else.
    public init?(slotName: String) {
        if slotName == Self.slotPrefix {
            self = .default
            return
        }
        let prefix = Self.slotPrefix + "_"
        guard slotName.hasPrefix(prefix), let cluster = try? CacheCluster(String(slotName.dropFirst(prefix.count))),
            cluster != .default
        else { return nil }
        self = cluster
    }

    /// A `LIKE` pattern matching every cluster's slot (and possibly other names, which
    /// ``init(slotName:)`` tells apart).
    public static let slotPattern = #"profile\_service\_cache%"#

    static let slotPrefix = "profile_service_cache"
    static let channelPrefix = "profile_changes"

    private static func isValidName(_ name: String) -> Bool {
        guard let first = name.utf8.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first),
            name.utf8.count <= maximumNameLength
        else { return false }
        return name.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "_")
        }
    }
}
