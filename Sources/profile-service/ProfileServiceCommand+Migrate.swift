import ArgumentParser
import Logging
import PostgresClient
import ProfileService

extension ProfileServiceCommand {
    struct Migrate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply pending SQL migrations, in name order, each in its own transaction.",
            discussion: "Idempotent; replicas may run it together (an advisory lock serializes them).")

        @OptionGroup var database: DatabaseOptions

        @Option(help: "Folder of *.sql migrations. [PROFILE_MIGRATIONS_DIR]")
        var migrationsDirectory: String = EnvironmentDefaults.string("PROFILE_MIGRATIONS_DIR", "migrations")

        @OptionGroup var cacheCluster: CacheClusterOption

        @OptionGroup var logging: LoggingOptions

        func run() throws {
            try logging.bootstrap()
            let logger = Logger(label: "profile-service.migrate")
            let migrations: [Migration]
            do {
                migrations = try Migration.load(from: migrationsDirectory)
            } catch {
                throw RuntimeFailure(description: "cannot read migrations from \(migrationsDirectory): \(error)")
            }
            let connection = PostgresConnection(
                configuration: try database.directConfiguration(), statements: Migrator.statements, logger: logger)
            defer { connection.close() }
            do {
                try connection.connect()
                let applied = try Migrator(connection: connection, logger: logger).migrate(migrations)
                logger.info(
                    applied.isEmpty ? "schema up to date" : "migrations applied",
                    metadata: ["applied": "\(applied.count)", "total": "\(migrations.count)"])
            } catch let error as PostgresError where error.kind == .connectionUnavailable {
                // libpq's reason ("password authentication failed for user …"); never the password.
                throw RuntimeFailure(description: "migrate failed: cannot connect to PostgreSQL: \(error.message)")
            } catch {
                throw RuntimeFailure(description: "migrate failed: \(error)")
            }
            createChangeFeedSlot(for: try cacheCluster.cluster(), on: connection, logger: logger)
        }

        /// The cache cluster's change feed slot, so that changes from now on are kept for it even
        /// before the first `serve` (which creates it too). Not an error without logical
        /// decoding: the service runs with --no-change-feed there.
        private func createChangeFeedSlot(for cluster: CacheCluster, on connection: PostgresConnection, logger: Logger) {
            do {
                let slot = try CacheClusterSlots.slotName(for: cluster, on: connection)
                if try LogicalReplicationSetup.ensureSlot(named: slot, on: connection) {
                    logger.info(
                        "created the change feed's replication slot",
                        metadata: ["slot": "\(slot)", "cache_cluster": "\(cluster)"])
                }
            } catch {
                logger.warning(
                    "no replication slot for the change feed; serve will retry, or run it with --no-change-feed",
                    metadata: ["error": "\(error)"])
            }
        }
    }
}
