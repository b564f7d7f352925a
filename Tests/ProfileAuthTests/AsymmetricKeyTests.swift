import Crypto
import Foundation
import ProfileAuth
import Testing
import _CryptoExtras

@Suite struct AsymmetricKeyTests {
    static let rsaKey = try! _RSA.Signing.PrivateKey(keySize: .bits2048)

    func rejection(_ verifier: TokenVerifier, _ token: String) -> AuthError? {
        do {
            _ = try verifier.verify(authorizationHeader: "Bearer " + token)
            return nil
        } catch {
            return error
        }
    }

    @Test func es256WithAPublicKeyFile() throws {
        let key = P256.Signing.PrivateKey()
        let pem = key.publicKey.pemRepresentation
        let verifier = try TokenVerifier(
            configuration: AuthConfiguration(key: .publicKeyFile(try TestTokens.file(Data(pem.utf8))), algorithm: .es256))
        let claims = TestTokens.claims(sub: "5")
        #expect(rejection(verifier, TestTokens.token(alg: "ES256", claims: claims, signer: .p256(key))) == nil)
        #expect(rejection(verifier, TestTokens.token(alg: "ES256", claims: claims, signer: .p256(P256.Signing.PrivateKey()))) == .invalid(.signature))
        // HS/ES confusion: an HS256 token whose HMAC secret is the public key's PEM bytes.
        let confused = TestTokens.token(alg: "HS256", claims: claims, signer: .hmac(Array(pem.utf8)))
        #expect(rejection(verifier, confused) == .invalid(.algorithm))
    }

    @Test func rs256WithAPublicKeyFile() throws {
        let pem = Self.rsaKey.publicKey.pemRepresentation
        let verifier = try TokenVerifier(
            configuration: AuthConfiguration(key: .publicKeyFile(try TestTokens.file(Data(pem.utf8))), algorithm: .rs256))
        let claims = TestTokens.claims(sub: "5")
        #expect(rejection(verifier, TestTokens.token(alg: "RS256", claims: claims, signer: .rsa(Self.rsaKey))) == nil)
        // The classic confusion attack: HS256 signed with the RS256 public key (PEM and DER bytes) as secret.
        for secret in [Array(pem.utf8), Array(Self.rsaKey.publicKey.derRepresentation)] {
            let confused = TestTokens.token(alg: "HS256", claims: claims, signer: .hmac(secret))
            #expect(rejection(verifier, confused) == .invalid(.algorithm))
        }
        #expect(rejection(verifier, TestTokens.token(alg: "ES256", claims: claims, signer: .p256(P256.Signing.PrivateKey()))) == .invalid(.algorithm))
    }

    @Test func jwksPicksTheKeyByKeyIDAndSkipsOtherAlgorithms() throws {
        let first = P256.Signing.PrivateKey()
        let second = P256.Signing.PrivateKey()
        func jwk(_ key: P256.Signing.PrivateKey, kid: String, alg: String = "ES256") -> [String: Any] {
            let raw = key.publicKey.rawRepresentation
            return [
                "kty": "EC", "crv": "P-256", "kid": kid, "alg": alg, "use": "sig",
                "x": TestTokens.base64URL(raw.prefix(32)), "y": TestTokens.base64URL(raw.suffix(32)),
            ]
        }
        let primitives = try Self.rsaKey.publicKey.getKeyPrimitives()
        let set: [String: Any] = [
            "keys": [
                jwk(first, kid: "one"), jwk(second, kid: "two"),
                ["kty": "RSA", "kid": "rsa", "alg": "RS256", "n": TestTokens.base64URL(primitives.modulus),
                 "e": TestTokens.base64URL(primitives.publicExponent)],
            ]
        ]
        let verifier = try TokenVerifier(
            configuration: AuthConfiguration(key: .jwksFile(try TestTokens.file(TestTokens.json(set))), algorithm: .es256))
        let claims = TestTokens.claims()
        #expect(rejection(verifier, TestTokens.token(alg: "ES256", header: ["kid": "two"], claims: claims, signer: .p256(second))) == nil)
        #expect(rejection(verifier, TestTokens.token(alg: "ES256", header: ["kid": "one"], claims: claims, signer: .p256(second))) == .invalid(.signature))
        #expect(rejection(verifier, TestTokens.token(alg: "ES256", header: ["kid": "rsa"], claims: claims, signer: .p256(first))) == .invalid(.unknownKey))
        #expect(rejection(verifier, TestTokens.token(alg: "ES256", claims: claims, signer: .p256(first))) == nil)

        let rsaVerifier = try TokenVerifier(
            configuration: AuthConfiguration(key: .jwksFile(try TestTokens.file(TestTokens.json(set))), algorithm: .rs256))
        #expect(rejection(rsaVerifier, TestTokens.token(alg: "RS256", header: ["kid": "rsa"], claims: claims, signer: .rsa(Self.rsaKey))) == nil)
    }

    @Test func unusableKeyConfigurationsAreRefused() throws {
        let shortSecret = try TestTokens.file(Data("short".utf8))
        let privatePEM = try TestTokens.file(Data(P256.Signing.PrivateKey().pemRepresentation.utf8))
        let publicPEM = try TestTokens.file(Data(P256.Signing.PrivateKey().publicKey.pemRepresentation.utf8))
        let emptyJWKS = try TestTokens.file(Data(#"{"keys":[]}"#.utf8))
        let notJSON = try TestTokens.file(Data("nope".utf8))
        for configuration in [
            AuthConfiguration(key: .secretFile("/nonexistent/secret")),
            AuthConfiguration(key: .secretFile(shortSecret)),
            AuthConfiguration(key: .secretFile(publicPEM), algorithm: .rs256),
            AuthConfiguration(key: .publicKeyFile(publicPEM), algorithm: .hs256),
            AuthConfiguration(key: .publicKeyFile(publicPEM), algorithm: .rs256),
            AuthConfiguration(key: .publicKeyFile(privatePEM), algorithm: .es256),
            AuthConfiguration(key: .jwksFile(emptyJWKS), algorithm: .es256),
            AuthConfiguration(key: .jwksFile(notJSON), algorithm: .es256),
        ] {
            #expect(throws: AuthConfigurationError.self, "\(configuration.key)") {
                try TokenVerifier(configuration: configuration)
            }
        }
    }
}
