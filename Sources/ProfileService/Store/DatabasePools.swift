public import Logging
public import PostgresClient

/// The PostgreSQL connections that a set of workers share (docs/design.md §9): a pool of the
/// primary's and, with read replicas, as many readers of the standbys. Workers borrow a
/// connection per statement, so an instance opens at most `connections` to the primary (and to
/// each standby) whatever its number of workers.
public final class DatabasePools: Sendable {
    public let primary: PostgresConnectionPool
    public let standbys: PooledStandbyReader?
    /// The declared fields the connections' statements are written for.
    public let profileFields: ProfileFieldCatalog

    /// - Parameters:
    ///   - connections: Connections at most to the primary, and to each standby.
    ///   - health: The primary's health, shared with every other connection to it.
    ///   - replicas: Standbys for the rows of misses (docs/design.md §8), if any.
    public init(
        postgres: PostgresConfiguration, connections: Int, health: PostgresServerHealth, replicas: ReadReplicas? = nil,
        profileFields: ProfileFieldCatalog = .standard, logger: Logger
    ) {
        self.profileFields = profileFields
        primary = PostgresConnectionPool(
            size: connections, configuration: postgres, statements: PostgresProfileStore.statements(for: profileFields),
            health: health, logger: logger)
        standbys = replicas.flatMap {
            $0.standbys.isEmpty ? nil : PooledStandbyReader(replicas: $0, size: connections, profileFields: profileFields, logger: logger)
        }
    }

    /// Closes the idle connections; call it once the workers are done.
    public func close() {
        primary.close()
        standbys?.close()
    }
}
