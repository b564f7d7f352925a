import Foundation
import Synchronization
import Testing

@testable import ProfileAuth

/// A token verified once is not decoded again, but its time claims are checked on every use and
/// any other bytes are verified in full.
@Suite struct VerifiedClaimsCacheTests {
    let secret = Array("a development secret of at least 32 bytes".utf8)

    @Test func aCachedTokenStillExpires() throws {
        let clock = Mutex(Date())
        let verifier = try TokenVerifier(
            configuration: AuthConfiguration(key: .secretFile(try TestTokens.file(secret))),
            now: { clock.withLock { $0 } })
        let exp = Int(clock.withLock { $0 }.timeIntervalSince1970) + 60
        let token = TestTokens.token(
            alg: "HS256", header: [:], claims: TestTokens.claims(sub: "7", ["exp": exp]), signer: .hmac(secret))
        #expect(try verifier.verify(authorizationHeader: "Bearer " + token).subject == "7")
        #expect(try verifier.verify(authorizationHeader: "Bearer " + token).subject == "7", "from the cache")
        clock.withLock { $0 = $0.addingTimeInterval(60 + 31) }  // past exp and the 30 s leeway
        #expect(throws: AuthError.invalid(.expired)) { try verifier.verify(authorizationHeader: "Bearer " + token) }
    }

    @Test func anotherSignatureOrLookalikeIsVerifiedInFull() throws {
        let verifier = try TokenVerifier(configuration: AuthConfiguration(key: .secretFile(try TestTokens.file(secret))))
        let token = TestTokens.token(alg: "HS256", header: [:], claims: TestTokens.claims(), signer: .hmac(secret))
        #expect(try verifier.verify(authorizationHeader: "Bearer " + token).subject == "42")
        let parts = token.split(separator: ".")
        let tampered = parts[0] + "." + parts[1] + "." + String(parts[2].reversed())
        #expect(throws: AuthError.self) { try verifier.verify(authorizationHeader: "Bearer " + tampered) }
        // U+212A KELVIN SIGN is canonically equivalent to "K": equal as a String, not as bytes.
        if let k = token.firstIndex(of: "K") {
            var lookalike = token
            lookalike.replaceSubrange(k...k, with: "\u{212A}")
            #expect(lookalike == token, "Swift String equality is canonical equivalence")
            #expect(throws: AuthError.self) { try verifier.verify(authorizationHeader: "Bearer " + lookalike) }
        }
    }
}
