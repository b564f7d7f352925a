import ArgumentParser
import Foundation

/// `profile-service`: serves user profiles from PostgreSQL through memcached.
@main
struct ProfileServiceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profile-service",
        abstract: "Serves user profiles from PostgreSQL through a memcached cluster, with read-your-writes.",
        discussion: """
            Every option can also be set with the environment variable shown beside it; the
            command line wins. Invalid configuration exits with status 2 before anything binds.
            """,
        version: version,
        subcommands: [Serve.self, Migrate.self, CacheClusterCommand.self, Token.self, OpenAPI.self, APIContract.self]
    )

    /// The release this build is (`--version`, `profile_service_build_info`).
    static let version = "0.9.0-dev"

    /// The source revision, when the build's packaging set `PROFILE_BUILD_REVISION` (the
    /// Dockerfile does, from its `REVISION` argument); else `unknown`.
    static var revision: String {
        let revision = ProcessInfo.processInfo.environment["PROFILE_BUILD_REVISION"] ?? ""
        return revision.isEmpty ? "unknown" : revision
    }

    /// Exit status for invalid usage or configuration (ArgumentParser's own is EX_USAGE, 64).
    static let usageExitStatus: Int32 = 2

    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            if exitCode(for: error) == .validationFailure {
                FileHandle.standardError.write(Data("profile-service: error: \(message(for: error))\n".utf8))
                Foundation.exit(usageExitStatus)
            }
            exit(withError: error)
        }
    }
}

/// A failure at run time (not a usage error): printed as one line, exit status 1.
struct RuntimeFailure: Error, CustomStringConvertible {
    let description: String
}
