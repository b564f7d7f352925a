import ArgumentParser
import Foundation
import PostgresClient

/// Options shared by every subcommand that talks to PostgreSQL.
struct DatabaseOptions: ParsableArguments {
    static let defaultURL = "postgres://postgres@127.0.0.1:55432/profiles"

    @Option(
        name: .customLong("database-url"),
        help: "PostgreSQL URL (postgres://user:pass@host:port/db) or key=value conninfo. [PROFILE_DATABASE_URL]")
    var url: String = EnvironmentDefaults.string("PROFILE_DATABASE_URL", defaultURL)

    @Option(
        name: .customLong("database-direct-url"),
        help: ArgumentHelp(
            "PostgreSQL itself, not a pooler, for what cannot be pooled: the change feed's replication, LISTEN, the slot's status. When given, --database-url may be a pooler (transaction or session mode). [PROFILE_DATABASE_DIRECT_URL]",
            valueName: "url"))
    var directURL: String = EnvironmentDefaults.string("PROFILE_DATABASE_DIRECT_URL", "")

    @Option(
        help: ArgumentHelp(
            "File whose first line is the PostgreSQL password, replacing one in --database-url: out of argv and the environment. [PROFILE_DATABASE_PASSWORD_FILE]",
            valueName: "path"))
    var databasePasswordFile: String = EnvironmentDefaults.string("PROFILE_DATABASE_PASSWORD_FILE", "")

    @Option(help: "Statement timeout in milliseconds. [PROFILE_STATEMENT_TIMEOUT_MS]")
    var statementTimeoutMs: Int = EnvironmentDefaults.int("PROFILE_STATEMENT_TIMEOUT_MS", 5000)

    func validate() throws {
        try EnvironmentDefaults.validate()
        guard (1...600_000).contains(statementTimeoutMs) else {
            throw ValidationError("--statement-timeout-ms must be 1…600000, got \(statementTimeoutMs)")
        }
        _ = try postgresConfiguration()
        _ = try directConfiguration()
    }

    /// Whether `--database-url` is a pooler's: a direct URL was given beside it.
    var isPooled: Bool { !directURL.isEmpty && directURL != url }

    /// The line for requests: `--database-url`, through a pooler when a direct URL is given.
    func postgresConfiguration() throws -> PostgresConfiguration {
        try configuration(url, flag: "--database-url", pooled: isPooled)
    }

    /// The line for what cannot be pooled: `--database-direct-url`, else `--database-url`.
    func directConfiguration() throws -> PostgresConfiguration {
        isPooled ? try configuration(directURL, flag: "--database-direct-url", pooled: false) : try postgresConfiguration()
    }

    private func configuration(_ url: String, flag: String, pooled: Bool) throws -> PostgresConfiguration {
        let configuration: PostgresConfiguration
        do {
            configuration = try PostgresConfiguration(
                url: url, statementTimeout: .milliseconds(statementTimeoutMs), pooled: pooled)
        } catch {
            throw ValidationError("\(flag) is not a valid PostgreSQL URL or conninfo")
        }
        guard !databasePasswordFile.isEmpty else { return configuration }
        return configuration.withPassword(try Self.password(from: databasePasswordFile))
    }

    /// The first line of `path`, without its line break.
    static func password(from path: String) throws -> String {
        guard let contents = FileManager.default.contents(atPath: path) else {
            throw ValidationError("--database-password-file: cannot read \(path)")
        }
        let firstLine = String(decoding: contents, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            .first.map { $0.hasSuffix("\r") ? $0.dropLast() : $0 } ?? ""
        guard !firstLine.isEmpty else { throw ValidationError("--database-password-file: \(path) is empty") }
        return String(firstLine)
    }
}
