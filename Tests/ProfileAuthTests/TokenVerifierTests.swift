import Crypto
import Foundation
import ProfileAuth
import Testing
import _CryptoExtras

@Suite struct TokenVerifierTests {
    let secret = Array("a development secret of at least 32 bytes".utf8)

    func hs256Verifier(issuer: String? = nil, audience: String? = nil) throws -> TokenVerifier {
        try TokenVerifier(
            configuration: AuthConfiguration(
                key: .secretFile(try TestTokens.file(secret + [UInt8(ascii: "\n")])), issuer: issuer,
                audience: audience))
    }

    func hs256(_ claims: [String: Any], header: [String: Any] = [:]) -> String {
        TestTokens.token(alg: "HS256", header: header, claims: claims, signer: .hmac(secret))
    }

    func error(_ verifier: TokenVerifier, _ header: String?) -> AuthError? {
        do {
            _ = try verifier.verify(authorizationHeader: header)
            return nil
        } catch {
            if let header { #expect(!error.description.contains(header.dropFirst(7).prefix(20))) }
            return error
        }
    }

    @Test func ownTokenVerifiesWithSubjectAndScopes() throws {
        let verifier = try hs256Verifier()
        let token = try verifier.verify(
            authorizationHeader: "Bearer " + hs256(TestTokens.claims(sub: "42", ["scope": "a b", "scopes": ["c"]])))
        #expect(token.subject == "42")
        #expect(token.scopes == ["a", "b", "c"])
        #expect(try verifier.verify(authorizationHeader: "bearer  " + hs256(TestTokens.claims())).subject == "42")
    }

    @Test func minterAndVerifierAgree() throws {
        let path = try TestTokens.file(secret)
        let verifier = try TokenVerifier(configuration: AuthConfiguration(key: .secretFile(path), issuer: "i", audience: "a"))
        let token = try TokenMinter(secretFile: path).token(subject: "7", scope: "profiles:admin", issuer: "i", audience: "a")
        let verified = try verifier.verify(authorizationHeader: "Bearer \(token)")
        #expect(verified.subject == "7")
        #expect(verified.scopes == ["profiles:admin"])
        #expect(verified.expiresAt.map { abs($0.timeIntervalSinceNow - 3600) < 60 } == true)
    }

    @Test func missingAndMalformedHeaders() throws {
        let verifier = try hs256Verifier()
        #expect(error(verifier, nil) == .missing)
        for header in [
            "Basic x", "Bearer", "Bearer ", "Bearer a.b", "Bearer a.b.c.d", "Bearer a..c", "Bearer !!.??.**",
            "Token " + hs256(TestTokens.claims()), "Bearer " + hs256(TestTokens.claims()) + " extra",
            "Bearer " + String(repeating: "a", count: 9000) + ".b.c",
            "Bearerx " + hs256(TestTokens.claims()), "Béarer " + hs256(TestTokens.claims()),
            "Bearer " + hs256(TestTokens.claims()) + ",x", "Bearer\t" + hs256(TestTokens.claims()),
        ] {
            #expect(error(verifier, header) == .malformed, "\(header.prefix(40))")
        }
    }

    /// The scheme in any case, spaces before it and around the token (RFC 9110 §11.1, §11.4).
    @Test func theBearerSchemeIsCaseInsensitiveAndSpacesAroundTheTokenAreAllowed() throws {
        let verifier = try hs256Verifier()
        let token = hs256(TestTokens.claims())
        for header in ["bearer " + token, "BEARER " + token, "  Bearer   " + token + " \t", "bEaReR " + token] {
            #expect(error(verifier, header) == nil, "\(header.prefix(20))")
        }
    }

    @Test func expiredTokenIsRejectedBeyondTheLeeway() throws {
        let verifier = try hs256Verifier()
        let now = TestTokens.now
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["exp": now - 120]))) == .invalid(.expired))
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["exp": now - 10]))) == nil)
        var noExpiry = TestTokens.claims()
        noExpiry["exp"] = nil
        #expect(error(verifier, "Bearer " + hs256(noExpiry)) == .invalid(.missingExpiry))
    }

    @Test func tokensThatClaimToLiveTooLongAreRejected() throws {
        let verifier = try hs256Verifier()
        let now = TestTokens.now
        for exp in [1e300, Double(now + 86_400 * 365), Double(now + 86_400 + 120)] {
            #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["exp": exp]))) == .invalid(.lifetimeTooLong), "\(exp)")
        }
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["exp": now + 86_400]))) == nil)
        let strict = try TokenVerifier(
            configuration: AuthConfiguration(
                key: .secretFile(try TestTokens.file(secret)), maximumLifetime: .seconds(600)))
        #expect(error(strict, "Bearer " + hs256(TestTokens.claims(["exp": now + 3600]))) == .invalid(.lifetimeTooLong))
        #expect(error(strict, "Bearer " + hs256(TestTokens.claims(["exp": now + 500]))) == nil)
    }

    @Test func futureNotBeforeAndIssuedAtAreRejected() throws {
        let verifier = try hs256Verifier()
        let now = TestTokens.now
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["nbf": now + 120]))) == .invalid(.notYetValid))
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["nbf": now + 10]))) == nil)
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["iat": now + 120]))) == .invalid(.issuedInFuture))
    }

    @Test func badSignatureIsRejected() throws {
        let verifier = try hs256Verifier()
        let other = TestTokens.token(
            alg: "HS256", claims: TestTokens.claims(), signer: .hmac(Array("another secret, also 32 bytes long!".utf8)))
        #expect(error(verifier, "Bearer " + other) == .invalid(.signature))
        // A valid signature over different claims.
        let parts = hs256(TestTokens.claims(sub: "1")).split(separator: ".")
        let forged = hs256(TestTokens.claims(sub: "2")).split(separator: ".")
        #expect(error(verifier, "Bearer \(parts[0]).\(forged[1]).\(parts[2])") == .invalid(.signature))
    }

    @Test func algNoneIsRejected() throws {
        let verifier = try hs256Verifier()
        let unsigned = TestTokens.token(alg: "none", claims: TestTokens.claims(), signer: .unsigned)
        #expect(unsigned.hasSuffix("."))
        #expect(error(verifier, "Bearer " + unsigned) == .malformed)
        #expect(error(verifier, "Bearer " + unsigned + "AAAA") == .invalid(.algorithm))
        let other = TestTokens.token(alg: "HS512", claims: TestTokens.claims(), signer: .hmac(secret))
        #expect(error(verifier, "Bearer " + other) == .invalid(.algorithm))
    }

    @Test func criticalHeaderIsRejected() throws {
        let verifier = try hs256Verifier()
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(), header: ["crit": ["exp"]])) == .invalid(.criticalHeader))
    }

    @Test func issuerAndAudienceAreChecked() throws {
        let verifier = try hs256Verifier(issuer: "https://idp.example", audience: "profile-service")
        let good = TestTokens.claims(["iss": "https://idp.example", "aud": ["other", "profile-service"]])
        #expect(error(verifier, "Bearer " + hs256(good)) == nil)
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["iss": "https://idp.example", "aud": "profile-service"]))) == nil)
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["iss": "https://evil.example", "aud": "profile-service"]))) == .invalid(.issuer))
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["aud": "profile-service"]))) == .invalid(.issuer))
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["iss": "https://idp.example", "aud": "other"]))) == .invalid(.audience))
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["iss": "https://idp.example"]))) == .invalid(.audience))
    }

    @Test func claimsOfTheWrongTypeAreRejected() throws {
        let verifier = try hs256Verifier()
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["exp": "tomorrow"]))) == .invalid(.claims))
        #expect(error(verifier, "Bearer " + hs256(TestTokens.claims(["scope": 5]))) == .invalid(.claims))
        var noSubject = TestTokens.claims()
        noSubject["sub"] = nil
        #expect(error(verifier, "Bearer " + hs256(noSubject)) == .invalid(.missingSubject))
    }

    @Test func ownerOrAdminMayWrite() {
        #expect(VerifiedToken(subject: "42").mayWrite(profileID: 42))
        #expect(!VerifiedToken(subject: "43").mayWrite(profileID: 42))
        #expect(!VerifiedToken(subject: "042").mayWrite(profileID: 42))
        #expect(!VerifiedToken(subject: "42", scopes: ["profiles:read"]).mayWrite(profileID: 7))
        #expect(VerifiedToken(subject: "service", scopes: ["profiles:admin"]).mayWrite(profileID: 7))
    }
}
