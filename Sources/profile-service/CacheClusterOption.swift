import ArgumentParser
import ProfileService

/// `--cache-cluster`: which memcached cluster an instance belongs to, for `serve` and `migrate`.
struct CacheClusterOption: ParsableArguments {
    @Option(
        name: .customLong("cache-cluster"),
        help: ArgumentHelp(
            """
            The memcached cluster --memcached names, when one PostgreSQL serves several (a region \
            each, or a move to new nodes): each cluster has a replication slot and a change feed of \
            its own, so every change reaches every cluster. The instances of a cluster name it \
            alike; 1-32 lowercase letters, digits or '_'. [PROFILE_CACHE_CLUSTER]
            """, valueName: "name"))
    var name: String = EnvironmentDefaults.string("PROFILE_CACHE_CLUSTER", CacheCluster.default.name)

    func validate() throws {
        _ = try cluster()
    }

    func cluster() throws -> CacheCluster {
        do {
            return try CacheCluster(name)
        } catch {
            throw ValidationError("--cache-cluster: \(error)")
        }
    }
}
