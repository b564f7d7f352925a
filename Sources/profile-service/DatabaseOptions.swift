import ArgumentParser
import PostgresClient

/// Options shared by every subcommand that talks to PostgreSQL.
struct DatabaseOptions: ParsableArguments {
    static let defaultURL = "postgres://postgres@127.0.0.1:55432/profiles"

    @Option(
        name: .customLong("database-url"),
        help: "PostgreSQL URL (postgres://user:pass@host:port/db) or key=value conninfo. [PROFILE_DATABASE_URL]")
    var url: String = EnvironmentDefaults.string("PROFILE_DATABASE_URL", defaultURL)

    @Option(help: "Statement timeout in milliseconds. [PROFILE_STATEMENT_TIMEOUT_MS]")
    var statementTimeoutMs: Int = EnvironmentDefaults.int("PROFILE_STATEMENT_TIMEOUT_MS", 5000)

    func validate() throws {
        try EnvironmentDefaults.validate()
        guard (1...600_000).contains(statementTimeoutMs) else {
            throw ValidationError("--statement-timeout-ms must be 1…600000, got \(statementTimeoutMs)")
        }
        _ = try postgresConfiguration()
    }

    func postgresConfiguration() throws -> PostgresConfiguration {
        do {
            return try PostgresConfiguration(url: url, statementTimeout: .milliseconds(statementTimeoutMs))
        } catch {
            throw ValidationError("--database-url is not a valid PostgreSQL URL or conninfo")
        }
    }
}
