public import MemcachedClient
import PostgresClient
import ServiceRuntime

/// The memcached nodes one cache cluster's instances serve (docs/design.md §3.10), as the
/// instances tell each other through PostgreSQL (`cache_cluster_instances`, migration 0006).
///
/// One cluster name is one slot and one consumer, which repairs the nodes *it* was given. Instances
/// of that name given other nodes — a region that missed `--cache-cluster` — share the slot but
/// their nodes are never repaired: stale until the TTL while everything reports healthy. Every
/// instance's feed writes its row (``heartbeat(cluster:instance:nodes:on:)``) and reads every
/// cluster's node sets, so two sets of one name show on `/readyz` and in
/// `profile_service_cache_cluster_node_sets`, and alert. A rolling replacement of nodes has two
/// sets for minutes: a warning, never a refusal to serve.
public struct CacheClusterNodeSet: Sendable, Equatable {
    /// The nodes, `host:port`, sorted: instances that list them in another order serve one set.
    public var nodes: [String]
    /// The instances that serve them (`profile-service/<cluster>/<host>/<pid>`), sorted.
    public var instances: [String]

    public init(nodes: [String], instances: [String]) {
        self.nodes = nodes
        self.instances = instances
    }

    /// How a node set is stored: its nodes sorted and joined by `,`.
    public static func key(_ servers: [MemcachedServer]) -> String {
        Set(servers.map(\.description)).sorted().joined(separator: ",")
    }

    /// The node sets of each cluster among the rows of fresh instances (cluster, node set key,
    /// instance); rows of names that are not clusters are left out.
    static func grouped(_ rows: [(cluster: String, nodeSet: String, instance: String)]) -> [CacheCluster: [CacheClusterNodeSet]] {
        var sets: [CacheCluster: [String: [String]]] = [:]
        for row in rows {
            guard let cluster = try? CacheCluster(row.cluster) else { continue }
            sets[cluster, default: [:]][row.nodeSet, default: []].append(row.instance)
        }
        return sets.mapValues { byKey in
            byKey.keys.sorted().map { key in
                CacheClusterNodeSet(
                    nodes: key.split(separator: ",").map(String.init), instances: byKey[key, default: []].sorted())
            }
        }
    }

    /// Records that `instance` of `cluster` serves `nodes` now, forgets instances not seen for an
    /// hour, and returns every cluster's node sets among instances seen within `expiry`.
    ///
    /// - Throws: ``PostgresError``; 42P01 before migration 0006.
    static func heartbeat(
        cluster: CacheCluster, instance: String, nodes: [MemcachedServer], expiry: Duration, on connection: PostgresConnection
    ) throws -> [CacheCluster: [CacheClusterNodeSet]] {
        _ = try connection.execute(.cacheClusterHeartbeat, [cluster.name, instance, key(nodes)])
        let seconds = Double(expiry.totalNanoseconds) / 1e9
        let rows = try connection.execute(.cacheClusterNodeSets, [String(seconds)]).rows.map { row in
            (cluster: try row.decode("cluster", as: String.self), nodeSet: try row.decode("node_set", as: String.self),
             instance: try row.decode("instance", as: String.self))
        }
        return grouped(rows)
    }

    /// Deletes `instance`'s row: it stops serving, so its node set is no longer one of the cluster's.
    static func leave(cluster: CacheCluster, instance: String, on connection: PostgresConnection) throws {
        _ = try connection.execute(.cacheClusterLeave, [cluster.name, instance])
    }
}

extension PostgresStatement {
    fileprivate static let cacheClusterHeartbeat = PostgresStatement(
        name: "cache_cluster_heartbeat",
        sql: """
            WITH forgotten AS (
                DELETE FROM cache_cluster_instances WHERE seen_at < now() - interval '1 hour' AND instance <> $2
            )
            INSERT INTO cache_cluster_instances (cluster, instance, node_set, seen_at) VALUES ($1, $2, $3, now())
            ON CONFLICT (cluster, instance) DO UPDATE SET node_set = EXCLUDED.node_set, seen_at = EXCLUDED.seen_at
            """,
        isIdempotent: true)
    fileprivate static let cacheClusterNodeSets = PostgresStatement(
        name: "cache_cluster_node_sets",
        sql: """
            SELECT cluster, node_set, instance FROM cache_cluster_instances
            WHERE seen_at > now() - make_interval(secs => $1::float8)
            """,
        isIdempotent: true)
    fileprivate static let cacheClusterLeave = PostgresStatement(
        name: "cache_cluster_leave",
        sql: "DELETE FROM cache_cluster_instances WHERE cluster = $1 AND instance = $2", isIdempotent: true)
}
