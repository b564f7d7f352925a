import Foundation
import HTTP1
import Testing

@testable import ProfileService

@Suite struct ProfileWriteRequestTests {
    private func parse(_ json: String, ifMatch: Int32? = nil, create: Bool = false) throws(ProfileRequestError)
        -> ProfileWriteRequest
    {
        try ProfileWriteRequest.parse(body: Array(json.utf8), ifMatchVersion: ifMatch, ifNoneMatchAny: create, catalog: .standard)
    }

    private func error(_ json: String, ifMatch: Int32? = nil, create: Bool = false) -> ProfileRequestError? {
        do {
            _ = try parse(json, ifMatch: ifMatch, create: create)
            return nil
        } catch {
            return error
        }
    }

    @Test func updateWithVersionInBody() throws {
        #expect(try parse(#"{"display_name":"Ada","version":3}"#) == .update(displayName: "Ada", expectedVersion: 3))
    }

    @Test func updateWithIfMatch() throws {
        #expect(try parse(#"{"display_name":"Ada"}"#, ifMatch: 7) == .update(displayName: "Ada", expectedVersion: 7))
    }

    @Test func bodyVersionMustAgreeWithIfMatch() throws {
        #expect(try parse(#"{"display_name":"Ada","version":4}"#, ifMatch: 4) == .update(displayName: "Ada", expectedVersion: 4))
        guard case .preconditionFailed(field: "If-Match", _)? = error(#"{"display_name":"Ada","version":3}"#, ifMatch: 4)
        else {
            Issue.record("expected 412 for If-Match disagreeing with version")
            return
        }
    }

    @Test func aUsernameMakesACreateWithOrWithoutVersionZeroOrIfNoneMatch() throws {
        let create = ProfileWriteRequest.create(username: "ada", displayName: "Ada")
        #expect(try parse(#"{"username":"ada","display_name":"Ada","version":0}"#) == create)
        #expect(try parse(#"{"username":"ada","display_name":"Ada"}"#, create: true) == create)
        #expect(try parse(#"{"username":"ada","display_name":"Ada"}"#) == create)
    }

    @Test func contradictoryPreconditionsAre412AndOnlyForWellFormedInput() {
        guard case .preconditionFailed(field: "If-Match", _)? = error(#"{"username":"ada","display_name":"Ada"}"#, ifMatch: 1),
            case .preconditionFailed(field: "If-None-Match", _)? = error(#"{"display_name":"Ada","version":1}"#, create: true),
            case .preconditionFailed(field: "If-None-Match", _)? = error(#"{"display_name":"Ada"}"#, ifMatch: 1, create: true)
        else {
            Issue.record("expected 412 for contradictory preconditions")
            return
        }
        // Input errors come first: a 412 always means every part was well formed.
        #expect(error(#"{"display_name":"","version":1}"#, create: true) == .invalidField("display_name", "must be 1 to 64 characters long, as sent and in Unicode NFC"))
        guard case .invalidField("username", _)? = error(#"{"username":"A","display_name":"Ada"}"#, ifMatch: 1) else {
            Issue.record("expected the bad username before the precondition")
            return
        }
    }

    @Test func anUpdateWithoutAnExpectedVersionIs428() {
        guard case .preconditionRequired? = error(#"{"display_name":"Ada"}"#) else {
            Issue.record("expected 428 for an update without version or If-Match")
            return
        }
        #expect(error(#"{"display_name":"Ada"}"#).map(\.problem.status.code) == 428)
    }

    @Test func missingFieldsAreNamed() {
        #expect(error(#"{"version":3}"#) == .missingField("display_name"))
        #expect(error(#"{"display_name":"Ada","version":0}"#) == .missingField("username"))
    }

    @Test(arguments: [
        #"{"display_name":5,"version":1}"#, #"{"display_name":"Ada","version":"1"}"#,
        #"{"display_name":"Ada","version":1.5}"#, #"{"display_name":null,"version":true}"#,
        #"{"display_name":null,"version":1}"#, #"{"display_name":"Ada","version":null}"#,
        #"{"display_name":"Ada","version":1,"username":null}"#,
    ])
    func wrongTypesAreMalformedAndNamed(json: String) {
        guard case .malformed(let field?, _)? = error(json) else {
            Issue.record("expected a malformed error naming a field for \(json)")
            return
        }
        #expect(["display_name", "version", "username"].contains(field))
    }

    @Test(arguments: ["", "{", "[]", "\"text\"", "{\"display_name\":\"Ada\",}", "null"])
    func malformedBodies(json: String) {
        guard case .malformed? = error(json) else {
            Issue.record("expected malformed for \(json)")
            return
        }
    }

    @Test(arguments: [Int64(-1), 2_147_483_648, 99_999_999_999])
    func versionOutOfRange(version: Int64) {
        guard case .invalidField("version", _)? = error(#"{"display_name":"Ada","version":\#(version)}"#) else {
            Issue.record("expected invalid version for \(version)")
            return
        }
    }

    @Test func displayNameIsCountedInCodePointsAsSentAndStoredInNFC() throws {
        // "é" as e + combining acute: two code points (JSON Schema's maxLength counts them so),
        // stored as U+00E9.
        let decomposed = "Ren\u{65}\u{301}e"
        let request = try parse(#"{"display_name":"\#(decomposed)","version":1}"#)
        #expect(request == .update(displayName: "Ren\u{E9}e", expectedVersion: 1))
        let sixtyFour = String(repeating: "\u{65}\u{301}", count: 32)
        #expect(try parse(#"{"display_name":"\#(sixtyFour)","version":1}"#)
            == .update(displayName: String(repeating: "\u{E9}", count: 32), expectedVersion: 1))
        let sixtyFive = sixtyFour + "\u{301}"
        #expect(error(#"{"display_name":"\#(sixtyFive)","version":1}"#) == .invalidField("display_name", "must be 1 to 64 characters long, as sent and in Unicode NFC"))
        #expect(throws: Never.self) { try parse(#"{"display_name":"\#(String(repeating: "\u{1F600}", count: 64))","version":1}"#) }
    }

    @Test func displayNameLengthHoldsForTheStoredNFCForm() throws {
        // U+FB2C (HEBREW LETTER SHIN WITH DAGESH AND SHIN DOT) is excluded from composition: one
        // code point as sent, three in NFC. 64 of them pass a count as sent; 192 would be stored.
        let expanding = String(repeating: "\u{FB2C}", count: 64)
        #expect(error(#"{"display_name":"\#(expanding)","version":1}"#)
            == .invalidField("display_name", "must be 1 to 64 characters long, as sent and in Unicode NFC"))
        let fits = String(repeating: "\u{FB2C}", count: 21)  // 63 code points stored
        guard case .update(let changes, _) = try parse(#"{"display_name":"\#(fits)","version":1}"#), let stored = changes.displayName else {
            Issue.record("expected an update")
            return
        }
        #expect(stored.unicodeScalars.count == 63)
        #expect(stored == fits.precomposedStringWithCanonicalMapping)
    }

    @Test(arguments: [
        "", "   ", String(repeating: "x", count: 65), "a\\u0000b", "line\\nbreak", "tab\\tname", "bidi\u{202E}x",
        "\u{3000}\u{A0}", " \u{2028}", "\u{2066}x",
    ])
    func invalidDisplayNames(name: String) {
        guard case .invalidField("display_name", _)? = error(#"{"display_name":"\#(name)","version":1}"#) else {
            Issue.record("expected display_name to be refused: \(name.debugDescription)")
            return
        }
    }

    @Test(arguments: ["Ada", "ADA.L", "a_1", String(repeating: "Z", count: 32)])
    func validUsernamesKeepTheirSpelling(username: String) throws {
        #expect(try parse(#"{"username":"\#(username)","display_name":"A","version":0}"#) == .create(username: username, displayName: "A"))
    }

    @Test(arguments: ["ab", String(repeating: "a", count: 33), "ada-l", "ad a", "ädä", "ＡＤＡ"])
    func invalidUsernames(username: String) {
        guard case .invalidField("username", _)? = error(#"{"username":"\#(username)","display_name":"A","version":0}"#)
        else {
            Issue.record("expected username to be refused: \(username)")
            return
        }
    }

    @Test func usernameCannotChangeOnUpdate() {
        // A username with a version to update: neither a create (version 0 or none) nor an update.
        guard case .invalidField("version", _)? = error(#"{"username":"ada","display_name":"A","version":2}"#) else {
            Issue.record("expected a username with version 2 to be refused")
            return
        }
    }

    @Test func deeplyNestedBodyIsRefused() throws {
        let deep = #"{"display_name":"Ada","version":1,"extra":"# + String(repeating: "[", count: 200)
            + String(repeating: "]", count: 200) + "}"
        guard case .malformed? = error(deep) else {
            Issue.record("expected a deeply nested body to be refused")
            return
        }
        // Within the bound the nesting is read, and the member refused for what it is.
        let shallow = #"{"display_name":"Ada","version":1,"extra":{"a":[1,{"b":"[[[[[[[[["}]}}"#
        #expect(error(shallow) == .invalidField("extra", "is not a field of a profile"))
    }

    /// A name of code points below U+0300 skips normalization: it must be its own NFC form, alone
    /// and next to any other of them.
    @Test func namesBelowTheCombiningMarksAreTheirOwnNFCForm() throws {
        let below = (UInt32(0)..<0x300).compactMap { Unicode.Scalar($0) }
        for scalar in below {
            let text = String(Character(scalar))
            #expect(ProfileValidation.isNFCByItsCodePoints(text))
            #expect(Array(text.precomposedStringWithCanonicalMapping.unicodeScalars) == [scalar])
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            var scalars = String.UnicodeScalarView()
            for _ in 0..<8 { scalars.append(below.randomElement(using: &generator)!) }
            let text = String(scalars)
            #expect(Array(text.precomposedStringWithCanonicalMapping.unicodeScalars) == Array(text.unicodeScalars))
        }
        #expect(!ProfileValidation.isNFCByItsCodePoints("e\u{301}"), "a combining mark goes to Foundation")
        #expect(!ProfileValidation.isNFCByItsCodePoints("\u{FB2C}"))
        #expect(try ProfileValidation.validDisplayName("Zoe\u{308}") == "Zo\u{EB}")
    }
}

extension ProfileWriteRequest {
    /// An update of the display name alone.
    static func update(displayName: String, expectedVersion: Int32) -> ProfileWriteRequest {
        .update(ProfileChanges(displayName: displayName), expectedVersion: expectedVersion)
    }

    /// A creation without fields.
    static func create(username: String, displayName: String) -> ProfileWriteRequest {
        .create(username: username, displayName: displayName, fields: [])
    }
}
