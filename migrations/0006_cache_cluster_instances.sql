-- The instances of each cache cluster and the memcached nodes each serves (docs/design.md §3.10):
-- every instance's change feed writes its row every few seconds and reads the others', so that
-- instances of one cluster name given different nodes (a missed --cache-cluster: one slot, one
-- consumer, and the other nodes never repaired) are seen on /readyz, in metrics and by an alert.
-- A row older than the feed's expiry no longer counts; an instance that stops deletes its own.
CREATE TABLE cache_cluster_instances (
    cluster  TEXT        NOT NULL,
    -- The instance as its replication session names it: profile-service/<cluster>/<host>/<pid>.
    instance TEXT        NOT NULL,
    -- Its --memcached nodes, host:port, sorted and joined by ','.
    node_set TEXT        NOT NULL,
    seen_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, instance)
);
