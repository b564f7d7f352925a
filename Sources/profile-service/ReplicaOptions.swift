import ArgumentParser
import Foundation
import PostgresClient
import ProfileService

/// Options of the read replicas: PostgreSQL standbys for the rows of cache misses (docs/design.md §8).
struct ReplicaOptions: ParsableArguments {
    @Option(
        name: .customLong("replica-database-url"),
        help: """
            A streaming standby of the primary (repeatable): cache misses, list misses and min_version \
            reads read rows there when it proves it is new enough; everything else stays on the \
            primary. [PROFILE_REPLICA_DATABASE_URLS, comma-separated]
            """)
    var urls: [String] = (EnvironmentDefaults.optionalString("PROFILE_REPLICA_DATABASE_URLS") ?? "")
        .split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }

    @Option(help: "Seconds a standby may lag (since its last replayed commit) before it is skipped. [PROFILE_REPLICA_MAX_LAG_S]")
    var replicaMaxLagS: Double = EnvironmentDefaults.double("PROFILE_REPLICA_MAX_LAG_S", 5)

    @Option(help: "WAL bytes a standby may lag before it is skipped. [PROFILE_REPLICA_MAX_LAG_BYTES]")
    var replicaMaxLagBytes: Int = EnvironmentDefaults.int("PROFILE_REPLICA_MAX_LAG_BYTES", 16 << 20)

    @Option(help: "Milliseconds between checks of each standby's health and lag. [PROFILE_REPLICA_CHECK_INTERVAL_MS]")
    var replicaCheckIntervalMs: Int = EnvironmentDefaults.int("PROFILE_REPLICA_CHECK_INTERVAL_MS", 1000)

    @Option(
        help: """
            Milliseconds a miss waits for a standby a little behind to replay the position it needs \
            (polled every 0.5 ms), then the primary answers; 0 never waits. [PROFILE_REPLICA_CATCH_UP_MS]
            """)
    var replicaCatchUpMs: Int = EnvironmentDefaults.int("PROFILE_REPLICA_CATCH_UP_MS", 5)

    @Option(
        help: """
            Milliseconds a standby has for a read or a check (statement timeout; a standby that does \
            not answer at all is given up 250 ms later); then the primary answers. \
            [PROFILE_REPLICA_TIMEOUT_MS]
            """)
    var replicaTimeoutMs: Int = EnvironmentDefaults.int("PROFILE_REPLICA_TIMEOUT_MS", 500)

    func validate() throws {
        try EnvironmentDefaults.validate()
        guard (0.001...3600).contains(replicaMaxLagS) else {
            throw ValidationError("--replica-max-lag-s must be 0.001…3600, got \(replicaMaxLagS)")
        }
        guard replicaMaxLagBytes >= 0 else { throw ValidationError("--replica-max-lag-bytes must be 0 or more") }
        guard (10...600_000).contains(replicaCheckIntervalMs) else {
            throw ValidationError("--replica-check-interval-ms must be 10…600000, got \(replicaCheckIntervalMs)")
        }
        guard (0...1000).contains(replicaCatchUpMs) else {
            throw ValidationError("--replica-catch-up-ms must be 0…1000, got \(replicaCatchUpMs)")
        }
        guard (10...60_000).contains(replicaTimeoutMs) else {
            throw ValidationError("--replica-timeout-ms must be 10…60000, got \(replicaTimeoutMs)")
        }
        _ = try configuration()
    }

    /// The standbys, or `nil` when none is configured.
    func replicas() throws -> ReadReplicas? {
        try configuration().map(ReadReplicas.init)
    }

    /// The standbys' settings (parsed without making their metrics, for `validate()`).
    private func configuration() throws -> ReadReplicas.Configuration? {
        guard !urls.isEmpty else { return nil }
        let standbys = try urls.enumerated().map { index, url in
            do {
                var configuration = try PostgresConfiguration(
                    url: url, applicationName: "profile-service-replica-reads",
                    statementTimeout: .milliseconds(replicaTimeoutMs), connectTimeout: .seconds(2))
                configuration.responseDeadline = .milliseconds(replicaTimeoutMs + 250)
                return configuration
            } catch {
                throw ValidationError("--replica-database-url #\(index + 1) is not a valid PostgreSQL URL or conninfo")
            }
        }
        var configuration = ReadReplicas.Configuration(standbys: standbys)
        configuration.maximumLag = .milliseconds(Int64(replicaMaxLagS * 1000))
        configuration.maximumLagBytes = UInt64(replicaMaxLagBytes)
        configuration.checkInterval = .milliseconds(replicaCheckIntervalMs)
        configuration.catchUpWait = .milliseconds(replicaCatchUpMs)
        return configuration
    }
}
