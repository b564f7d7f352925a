import ArgumentParser
import Logging
import ProfileAuth
import ProfileService

/// How `serve` authenticates requests: bearer JWTs (the default) or, by explicit choice, nothing.
struct AuthOptions: ParsableArguments {
    enum Mode: String, ExpressibleByArgument, CaseIterable {
        case jwt, none
    }

    @Option(help: "Authentication: jwt, or none (anyone may write any profile; development only). [PROFILE_AUTH]")
    var auth: Mode = Mode(rawValue: EnvironmentDefaults.string("PROFILE_AUTH", "jwt")) ?? .jwt

    @Option(help: "File holding the HS256 secret (at least 32 bytes). [PROFILE_JWT_SECRET_FILE]")
    var jwtSecretFile: String = EnvironmentDefaults.string("PROFILE_JWT_SECRET_FILE", "")

    @Option(help: "PEM public key for ES256 (P-256) or RS256 (RSA ≥ 2048). [PROFILE_JWT_PUBLIC_KEY_FILE]")
    var jwtPublicKeyFile: String = EnvironmentDefaults.string("PROFILE_JWT_PUBLIC_KEY_FILE", "")

    @Option(help: "JSON Web Key Set file for ES256 or RS256; keys chosen by kid. [PROFILE_JWT_JWKS_FILE]")
    var jwtJwksFile: String = EnvironmentDefaults.string("PROFILE_JWT_JWKS_FILE", "")

    @Option(help: "The only accepted token algorithm: HS256, ES256, RS256 (default HS256 with a secret file). [PROFILE_JWT_ALGORITHM]")
    var jwtAlgorithm: String = EnvironmentDefaults.string("PROFILE_JWT_ALGORITHM", "")

    @Option(help: "Required token issuer (iss). [PROFILE_JWT_ISSUER]")
    var jwtIssuer: String = EnvironmentDefaults.string("PROFILE_JWT_ISSUER", "")

    @Option(help: "Required token audience (aud). [PROFILE_JWT_AUDIENCE]")
    var jwtAudience: String = EnvironmentDefaults.string("PROFILE_JWT_AUDIENCE", "")

    @Flag(
        help: """
            With a public key or JWKS, accept tokens without checking issuer and audience (logged as \
            a warning); otherwise --jwt-issuer and --jwt-audience are required there, since a shared \
            identity provider signs tokens for other services too. [PROFILE_JWT_ANY_ISSUER_AND_AUDIENCE=1]
            """)
    var jwtAnyIssuerAndAudience: Bool = EnvironmentDefaults.bool("PROFILE_JWT_ANY_ISSUER_AND_AUDIENCE")

    @Option(
        help: """
            Longest a token may still be valid when presented, in seconds: a token whose exp is \
            further away is refused (401). [PROFILE_JWT_MAX_LIFETIME_S]
            """)
    var jwtMaxLifetimeS: Int = EnvironmentDefaults.int("PROFILE_JWT_MAX_LIFETIME_S", 86_400)

    @Option(help: "Clock skew tolerated for a token's exp, nbf and iat, in seconds. [PROFILE_JWT_LEEWAY_S]")
    var jwtLeewayS: Int = EnvironmentDefaults.int("PROFILE_JWT_LEEWAY_S", 30)

    @Flag(help: "GET and HEAD need a valid token too (any subject). [PROFILE_REQUIRE_AUTH_FOR_READS=1]")
    var requireAuthForReads: Bool = EnvironmentDefaults.bool("PROFILE_REQUIRE_AUTH_FOR_READS")

    private var secretFile: String? { jwtSecretFile.isEmpty ? nil : jwtSecretFile }
    private var publicKeyFile: String? { jwtPublicKeyFile.isEmpty ? nil : jwtPublicKeyFile }
    private var jwksFile: String? { jwtJwksFile.isEmpty ? nil : jwtJwksFile }

    func validate() throws {
        if let text = EnvironmentDefaults.optionalString("PROFILE_AUTH"), Mode(rawValue: text) == nil {
            throw ValidationError("PROFILE_AUTH must be jwt or none, got \(text.debugDescription)")
        }
        _ = try authorization()
    }

    /// The policy for ``ProfileResponder``; loads the key, so a bad file is a usage error (exit 2).
    func authorization() throws -> ProfileAuthorization {
        let keyFlags = [secretFile, publicKeyFile, jwksFile].compactMap { $0 }
        switch auth {
        case .none:
            guard keyFlags.isEmpty, !requireAuthForReads else {
                throw ValidationError("--auth none cannot be combined with JWT key flags or --require-auth-for-reads")
            }
            return .disabled
        case .jwt:
            guard keyFlags.count == 1 else {
                throw ValidationError(
                    keyFlags.isEmpty
                        ? "no authentication configured: pass --jwt-secret-file, --jwt-public-key-file or --jwt-jwks-file (or --auth none for development)"
                        : "pass only one of --jwt-secret-file, --jwt-public-key-file, --jwt-jwks-file")
            }
            let key: AuthConfiguration.KeySource =
                if let secretFile { .secretFile(secretFile) } else if let publicKeyFile {
                    .publicKeyFile(publicKeyFile)
                } else { .jwksFile(jwtJwksFile) }
            let algorithm: AuthConfiguration.Algorithm
            if !jwtAlgorithm.isEmpty {
                guard let pinned = AuthConfiguration.Algorithm(rawValue: jwtAlgorithm.uppercased()) else {
                    throw ValidationError("--jwt-algorithm must be HS256, ES256 or RS256, got \(jwtAlgorithm.debugDescription)")
                }
                algorithm = pinned
            } else if secretFile != nil {
                algorithm = .hs256
            } else {
                throw ValidationError("--jwt-algorithm (ES256 or RS256) is required with a public key or JWKS file")
            }
            if secretFile == nil, !jwtAnyIssuerAndAudience, jwtIssuer.isEmpty || jwtAudience.isEmpty {
                throw ValidationError(
                    "--jwt-issuer and --jwt-audience are required with a public key or JWKS file (a shared identity provider signs tokens for other services too); --jwt-any-issuer-and-audience accepts any")
            }
            guard (0...300).contains(jwtLeewayS) else {
                throw ValidationError("--jwt-leeway-s must be 0…300, got \(jwtLeewayS)")
            }
            guard (60...31_536_000).contains(jwtMaxLifetimeS) else {
                throw ValidationError("--jwt-max-lifetime-s must be 60…31536000, got \(jwtMaxLifetimeS)")
            }
            do {
                let verifier = try TokenVerifier(
                    configuration: AuthConfiguration(
                        key: key, algorithm: algorithm, issuer: jwtIssuer.isEmpty ? nil : jwtIssuer,
                        audience: jwtAudience.isEmpty ? nil : jwtAudience, leeway: .seconds(jwtLeewayS),
                        maximumLifetime: .seconds(jwtMaxLifetimeS)))
                return .required(verifier, forReads: requireAuthForReads)
            } catch {
                throw ValidationError(error.description)
            }
        }
    }

    /// Warns at start when authentication is off.
    func logMode(_ logger: Logger) {
        if auth == .none {
            logger.warning("authentication disabled (--auth none): anyone may change any profile")
        }
        if auth == .jwt, jwtSecretFile.isEmpty, jwtAnyIssuerAndAudience, jwtIssuer.isEmpty || jwtAudience.isEmpty {
            logger.warning(
                "tokens are accepted whatever their issuer or audience (--jwt-any-issuer-and-audience): a token the identity provider minted for another service is accepted here")
        }
    }
}
