import ArgumentParser
import Foundation
import Logging
import PostgresClient
import ProfileService

extension ProfileServiceCommand {
    /// `cache-cluster list|drop`: the replication slots of the cache clusters one PostgreSQL serves
    /// (docs/deployment.md, "Regions and several cache clusters").
    struct CacheClusterCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "cache-cluster",
            abstract: "List the cache clusters PostgreSQL keeps changes for, or drop a cluster that is gone.",
            discussion: """
                Each cache cluster (serve --cache-cluster) has a replication slot in its database; \
                PostgreSQL keeps WAL for a slot until its cluster's change feed consumes it, up to \
                max_slot_wal_keep_size. Drop the slot of a cluster that is gone. Both commands see \
                only the slots of the database --database-url names, never another database's on \
                the same server.
                """,
            subcommands: [List.self, Drop.self])

        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Every cache cluster's slot in this database: consumed or not, by whom, and the WAL it keeps.")

            @OptionGroup var database: DatabaseOptions

            @Flag(help: "One JSON array instead of a table (for scripts and jq).")
            var json = false

            func run() throws {
                let clusters = try withDirectConnection(database) { connection in try CacheClusterSlots.list(on: connection) }
                if json {
                    print(Self.json(clusters))
                    return
                }
                print("CLUSTER                          SLOT                                     CONSUMED  LAG_BYTES     RETAINED_BYTES  CONSUMER")
                for (cluster, slot) in clusters {
                    print(
                        [
                            cluster.name.padding(toLength: 32, withPad: " ", startingAt: 0),
                            slot.name.padding(toLength: 40, withPad: " ", startingAt: 0),
                            (slot.status.isActive ? "yes" : "no").padding(toLength: 9, withPad: " ", startingAt: 0),
                            (slot.status.lagBytes.map(String.init) ?? "-").padding(toLength: 13, withPad: " ", startingAt: 0),
                            (slot.status.retainedBytes.map(String.init) ?? "-").padding(toLength: 15, withPad: " ", startingAt: 0),
                            slot.consumer ?? "-",
                        ].joined(separator: " "))
                }
            }

            static func json(_ clusters: [(cluster: CacheCluster, slot: LogicalReplicationSetup.NamedSlot)]) -> String {
                let objects: [[String: Any]] = clusters.map { cluster, slot in
                    var object: [String: Any] = [
                        "cluster": cluster.name, "slot": slot.name, "consumed": slot.status.isActive,
                    ]
                    if let consumer = slot.consumer { object["consumer"] = consumer }
                    if let lag = slot.status.lagBytes { object["lag_bytes"] = lag }
                    if let retained = slot.status.retainedBytes { object["retained_bytes"] = retained }
                    if let walStatus = slot.status.walStatus { object["wal_status"] = walStatus }
                    return object
                }
                let data = (try? JSONSerialization.data(withJSONObject: objects, options: [.sortedKeys])) ?? Data("[]".utf8)
                return String(decoding: data, as: UTF8.self)
            }
        }

        struct Drop: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Drop the replication slot of a cache cluster that is gone.",
                discussion: """
                    Refused while an instance of the cluster consumes the slot. If instances of the \
                    cluster start again later, their change feed creates the slot anew and flushes \
                    the cluster's memcached nodes: nothing stale is served, the cache is cold once.
                    """)

            @Argument(help: "The cluster, as serve --cache-cluster named it.")
            var name: String

            @OptionGroup var database: DatabaseOptions

            func validate() throws {
                guard (try? CacheCluster(name)) != nil else {
                    throw ValidationError("\(name) is not a cache cluster name: 1-32 lowercase letters, digits or '_'")
                }
            }

            func run() throws {
                let cluster = try CacheCluster(name)
                try withDirectConnection(database) { connection in
                    // This database's slots of the cluster: normally one; two when its slot of the
                    // older name was created again during a rolling upgrade (docs/design.md §3.10).
                    let slots = try CacheClusterSlots.list(on: connection).filter { $0.cluster == cluster }.map(\.slot)
                    guard !slots.isEmpty else {
                        throw RuntimeFailure(
                            description: "no replication slot for cache cluster \(cluster) in this database "
                                + "(see: profile-service cache-cluster list)")
                    }
                    if let consumed = slots.first(where: \.status.isActive) {
                        throw RuntimeFailure(
                            description: "cache cluster \(cluster) is consumed now: an instance streams "
                                + "\(consumed.name); stop the cluster's instances first")
                    }
                    for slot in slots {
                        do {
                            try LogicalReplicationSetup.dropSlot(named: slot.name, on: connection)
                        } catch let error as PostgresError where error.isObjectInUse {
                            throw RuntimeFailure(
                                description: "cache cluster \(cluster) was taken by an instance just now; stop its instances first")
                        }
                        let retained = slot.status.retainedBytes.map { " (it kept \($0) bytes of WAL)" } ?? ""
                        print("dropped replication slot \(slot.name) of cache cluster \(cluster)\(retained)")
                    }
                }
            }
        }
    }
}

/// Runs `body` on a connection to PostgreSQL itself (`--database-direct-url`, else `--database-url`).
func withDirectConnection<T>(
    _ database: DatabaseOptions, _ body: (PostgresConnection) throws -> T
) throws -> T {
    let connection = PostgresConnection(
        configuration: try database.directConfiguration(), statements: [],
        // The command's answer is its output; the connection's own lines would only clutter it.
        logger: Logger(label: "profile-service.cache-cluster", factory: { _ in SwiftLogNoOpLogHandler() }))
    defer { connection.close() }
    do {
        try connection.connect()
    } catch let error as PostgresError {
        throw RuntimeFailure(description: "cannot connect to PostgreSQL: \(error.message)")
    }
    return try body(connection)
}
