import HTTP1
import PostgresClient

// `GET /readyz`: one JSON document, written member by member (openapi.yaml, `Readiness`).
extension ProfileResponder {
    /// Ready when PostgreSQL answers and no drain has begun; memcached's state (`up`, `degraded`:
    /// some nodes, `down`; docs/design.md §5) is reported but not required, since reads fall back
    /// to PostgreSQL without it.
    /// The change feed is reported too, never required: the cache is still served while it is
    /// down, only repaired later (docs/design.md §3).
    /// Standbys (docs/design.md §8) are reported, never required: without them the primary answers.
    func readiness(worker: ProfileWorker) -> HTTPResponse {
        var json = JSONWriter(capacity: 512)
        json.beginObject()
        let status: HTTPStatus
        if lifecycle.isDraining {
            status = .serviceUnavailable
            json.member("status", "draining")
        } else if !worker.store.isHealthy() {
            status = .serviceUnavailable
            json.member("status", "unavailable")
            json.member("database", "down")
            // libpq's reason, so that an operator sees "password authentication failed" or
            // "certificate verify failed" here and not only in the log.
            if let reason = lifecycle.databaseHealth?.downReason { json.member("database_error", reason) }
        } else {
            status = .ok
            json.member("status", "ready")
            json.member("database", "up")
        }
        json.member("memcached", worker.cacheReadiness().rawValue)
        let feed = lifecycle.changeFeed.current
        json.key("change_feed")
        Self.write(feed, to: &json)
        if !feed.clusters.isEmpty {
            json.key("cache_clusters")
            Self.write(feed.clusters, to: &json)
        }
        if let replicas = lifecycle.replicas {
            json.key("replicas")
            Self.write(replicas.statuses, to: &json)
        }
        json.endObject()
        return HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: json.bytes)
    }

    private static func write(_ feed: ChangeFeedStatus, to json: inout JSONWriter) {
        json.beginObject()
        json.member("cluster", feed.cluster.name)
        json.member("state", feed.state.rawValue)
        json.member("lag_bytes", feed.lagBytes)
        json.member("lag_seconds", (feed.lagSeconds * 1000).rounded() / 1000)
        json.member("pending_repairs", feed.pendingRepairs)
        json.member("gaps_closed", feed.gapsClosed)
        if let walStatus = feed.slotWALStatus {
            json.member("slot_wal_status", walStatus)
            if let retained = feed.slotRetainedBytes { json.member("slot_retained_bytes", retained) }
        }
        if feed.state == .stalled { json.member("reason", feed.detail ?? "") }
        if !feed.nodeSets.isEmpty {
            // More than one: instances of this cluster serve other memcached nodes, which its
            // consumer does not repair (docs/design.md §3.10). A warning; readiness is unchanged.
            json.key("node_sets")
            json.beginArray()
            for set in feed.nodeSets {
                json.beginObject()
                for (name, values) in [("nodes", set.nodes), ("instances", set.instances)] {
                    json.key(name)
                    json.beginArray()
                    for value in values { json.string(value) }
                    json.endArray()
                }
                json.endObject()
            }
            json.endArray()
        }
        json.endObject()
    }

    /// Every cache cluster's slot (docs/design.md §3.10): whether it has a consumer, which, and
    /// the WAL it is behind and keeps.
    private static func write(_ clusters: [CacheClusterStatus], to json: inout JSONWriter) {
        json.beginArray()
        for cluster in clusters {
            json.beginObject()
            json.member("name", cluster.cluster.name)
            json.member("slot", cluster.slot)
            json.member("consumed", cluster.isConsumed)
            if let consumer = cluster.consumer { json.member("consumer", consumer) }
            if let lag = cluster.lagBytes { json.member("lag_bytes", lag) }
            if let retained = cluster.retainedBytes { json.member("retained_bytes", retained) }
            if let walStatus = cluster.walStatus { json.member("wal_status", walStatus) }
            if !cluster.isConsumed { json.member("unconsumed_seconds", Int(cluster.unconsumedSeconds)) }
            json.endObject()
        }
        json.endArray()
    }

    private static func write(_ replicas: [ReadReplicas.Status], to json: inout JSONWriter) {
        json.beginArray()
        for replica in replicas {
            json.beginObject()
            json.member("name", replica.name)
            json.member("state", replica.state.rawValue)
            if let bytes = replica.lagBytes { json.member("lag_bytes", bytes) }
            if let seconds = replica.lagSeconds { json.member("lag_seconds", (seconds * 1000).rounded() / 1000) }
            json.member("reads_served", replica.readsServed)
            if let detail = replica.detail { json.member("reason", detail) }
            json.endObject()
        }
        json.endArray()
    }
}
