/// The memcached cluster an instance serves from and repairs (docs/design.md §3.10).
///
/// Every cluster needs every change: each has its own replication slot in its database — so
/// PostgreSQL keeps the commit stream for each until that cluster's consumer has applied it — and
/// its own notification channel, on which its consumer says what it repaired. One instance of each
/// cluster consumes its slot; the others stand by, as within one cluster.
///
/// Slot names are the server's, not the database's, so a slot's name carries its database's
/// object identifier: two databases of one server (production and staging) each have a
/// `default` cluster of their own. A slot named the way it was before that (``legacySlotName``)
/// is kept where it exists in the cluster's database (``CacheClusterSlots``).
///
/// ```swift
/// let cluster = try CacheCluster("eu_west")
/// cluster.slotName(inDatabase: 16384)  // "profile_service_16384_eu_west"
/// cluster.legacySlotName               // "profile_service_cache_eu_west"
/// cluster.notificationChannel          // "profile_changes_eu_west"
/// CacheCluster.default.legacySlotName  // "profile_service_cache"
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

    /// The logical replication slot of this cluster's change feed in the database whose
    /// `pg_database.oid` is `databaseOID`: at most 59 bytes, within PostgreSQL's 63.
    public func slotName(inDatabase databaseOID: UInt32) -> String {
        Self.scopedSlotPrefix + String(databaseOID) + "_" + name
    }

    /// The slot's name before names carried their database, which a deployment whose slot was
    /// created then keeps using (``CacheClusterSlots``).
    public var legacySlotName: String { self == .default ? Self.slotPrefix : Self.slotPrefix + "_" + name }

    /// The channel this cluster's consumer notifies after repairing the cluster, and its
    /// instances listen on (docs/design.md §4).
    public var notificationChannel: String {
        self == .default ? Self.channelPrefix : Self.channelPrefix + "_" + name
    }

    /// The cluster whose slot `slotName` is in the database `databaseOID` (a slot of either form),
    /// or nil for a slot of something else — a slot named for another database among them.
    public init?(slotName: String, inDatabase databaseOID: UInt32) {
        let scoped = Self.scopedSlotPrefix + String(databaseOID) + "_"
        if slotName.hasPrefix(scoped) {
            guard let cluster = try? CacheCluster(String(slotName.dropFirst(scoped.count))) else { return nil }
            self = cluster
            return
        }
        self.init(legacySlotName: slotName)
    }

    /// The cluster whose slot `slotName` is, named the way it was before names carried their
    /// database. A cluster name starts with a letter, and a database's identifier is digits, so
    /// no name reads both ways.
    init?(legacySlotName slotName: String) {
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

    /// A `LIKE` pattern matching every cluster's slot, of either form (and possibly other names,
    /// which ``init(slotName:inDatabase:)`` tells apart).
    public static let slotPattern = #"profile\_service\_%"#

    static let slotPrefix = "profile_service_cache"
    static let scopedSlotPrefix = "profile_service_"
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
