import ArgumentParser
import Foundation
import ProfileAuth

extension ProfileServiceCommand {
    struct Token: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print an HS256 bearer token signed with the secret that `serve --jwt-secret-file` uses.",
            discussion: "For development and tests: curl -H \"Authorization: Bearer $(profile-service token --sub 1)\" …")

        @Option(help: "Subject: the profile id the token may write.")
        var sub: String

        @Option(help: "Lifetime in seconds.")
        var ttl: Int = 3600

        @Option(help: "Space-separated scopes, e.g. profiles:admin.")
        var scope: String?

        @Option(help: "Issuer (iss), when serve checks it. [PROFILE_JWT_ISSUER]")
        var issuer: String = EnvironmentDefaults.string("PROFILE_JWT_ISSUER", "")

        @Option(help: "Audience (aud), when serve checks it. [PROFILE_JWT_AUDIENCE]")
        var audience: String = EnvironmentDefaults.string("PROFILE_JWT_AUDIENCE", "")

        @Option(help: "File holding the HS256 secret. [PROFILE_JWT_SECRET_FILE]")
        var jwtSecretFile: String = EnvironmentDefaults.string("PROFILE_JWT_SECRET_FILE", "")

        func validate() throws {
            try EnvironmentDefaults.validate()
            guard !sub.isEmpty else { throw ValidationError("--sub must not be empty") }
            guard (1...31_536_000).contains(ttl) else { throw ValidationError("--ttl must be 1…31536000, got \(ttl)") }
            _ = try minter()
        }

        func run() throws {
            let token = try minter().token(
                subject: sub, lifetime: .seconds(ttl), scope: scope, issuer: issuer.isEmpty ? nil : issuer,
                audience: audience.isEmpty ? nil : audience)
            print(token)
        }

        private func minter() throws -> TokenMinter {
            guard !jwtSecretFile.isEmpty else { throw ValidationError("--jwt-secret-file is required") }
            do {
                return try TokenMinter(secretFile: jwtSecretFile)
            } catch {
                throw ValidationError(error.description)
            }
        }
    }
}
