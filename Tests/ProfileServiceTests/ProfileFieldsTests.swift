import Foundation
import PostgresClient
import Testing

@testable import ProfileService

/// The declared fields: their declarations, the rules of each kind, and how PUT and PATCH bodies
/// set and unset them (pure logic; PostgreSQL and the HTTP path are in the integration and
/// end-to-end tests).
@Suite struct ProfileFieldsTests {
    private func put(_ json: String, catalog: ProfileFieldCatalog = .standard) throws(ProfileRequestError) -> ProfileWriteRequest {
        try ProfileWriteRequest.parse(body: Array(json.utf8), ifMatchVersion: nil, ifNoneMatchAny: false, catalog: catalog)
    }

    private func patch(_ json: String, catalog: ProfileFieldCatalog = .standard) throws(ProfileRequestError) -> ProfileChanges {
        try ProfilePatch.parse(body: Array(json.utf8), catalog: catalog)
    }

    private func refusal(_ body: () throws -> Any) -> ProfileRequestError? {
        do {
            _ = try body()
            return nil
        } catch {
            return error as? ProfileRequestError
        }
    }

    @Test func theStandardFieldsAreDeclaredInOrder() {
        #expect(ProfileFieldCatalog.standard.declarations.map(\.name) == ["bio", "avatar_url", "location", "website"])
        #expect(ProfileFieldCatalog.standard.unsetFields.entries.allSatisfy { $0.value == nil })
    }

    @Test func declarationsTheServiceCannotServeAreRefused() {
        let text = ProfileFieldDeclaration.Kind.text
        #expect(throws: ProfileFieldCatalogError.invalidName("Bio")) { try ProfileFieldCatalog([.init(name: "Bio", kind: text, maximumLength: 10)]) }
        #expect(throws: ProfileFieldCatalogError.invalidName("bio-text")) {
            try ProfileFieldCatalog([.init(name: "bio-text", kind: text, maximumLength: 10)])
        }
        #expect(throws: ProfileFieldCatalogError.reservedName("version")) {
            try ProfileFieldCatalog([.init(name: "version", kind: text, maximumLength: 10)])
        }
        #expect(throws: ProfileFieldCatalogError.duplicateName("bio")) {
            try ProfileFieldCatalog([.init(name: "bio", kind: text, maximumLength: 10), .init(name: "bio", kind: text, maximumLength: 10)])
        }
        #expect(throws: ProfileFieldCatalogError.invalidLength("bio", 0)) { try ProfileFieldCatalog([.init(name: "bio", kind: text, maximumLength: 0)]) }
        #expect(throws: ProfileFieldCatalogError.tooLong(8_001)) {
            try ProfileFieldCatalog([.init(name: "a", kind: text, maximumLength: 8_000), .init(name: "b", kind: text, maximumLength: 1)])
        }
    }

    @Test func moreFieldsThanTheBoundAreRefused() {
        let many = (0...ProfileFieldCatalog.maximumFieldCount).map {
            ProfileFieldDeclaration(name: "f\($0)", kind: .text, maximumLength: 1)
        }
        #expect(throws: ProfileFieldCatalogError.tooMany(ProfileFieldCatalog.maximumFieldCount + 1)) { try ProfileFieldCatalog(many) }
        #expect((try? ProfileFieldCatalog(Array(many.dropLast()))) != nil)
    }

    /// `value` with every character written as a JSON escape, the longest way to write it: a
    /// code point outside the Basic Multilingual Plane as its two surrogates (12 bytes).
    private func escaped(_ value: String) -> String {
        value.utf16.map { String(format: "\\u%04x", $0) }.joined()
    }

    /// The longest profile the declarations allow, written the longest way a client may write it
    /// (Python's `json.dumps` escapes every emoji so), fits the body limit — for the standard
    /// fields and for one field holding the whole bound.
    @Test(arguments: [
        ProfileFieldCatalog.standard,
        try! ProfileFieldCatalog([.init(name: "about", kind: .paragraph, maximumLength: ProfileFieldCatalog.maximumTotalLength)]),
    ])
    func theLongestProfileInItsLongestEncodingFitsTheBodyLimit(catalog: ProfileFieldCatalog) throws {
        var members = [
            "\"\(escaped("display_name"))\": \"\(escaped(String(repeating: "😀", count: 64)))\"",
            "\"\(escaped("version"))\": 12",
            "\"\(escaped("id"))\": 9223372036854775807",
            "\"\(escaped("updated_at"))\": \"\(escaped("2026-11-28T10:00:00.123456Z"))\"",
        ]
        for declaration in catalog.declarations {
            let value = declaration.kind == .httpsURL
                ? "https://example.com/" + String(repeating: "a", count: declaration.maximumLength - 20)
                : String(repeating: "😀", count: declaration.maximumLength)
            members.append("\"\(escaped(declaration.name))\": \"\(escaped(value))\"")
        }
        let body = "{\n  " + members.joined(separator: ",\n  ") + "\n}\n"
        #expect(body.utf8.count > 64 * 1024 || catalog == .standard)
        #expect(body.utf8.count <= catalog.maximumWriteBodyBytes, "\(body.utf8.count) > \(catalog.maximumWriteBodyBytes)")
        #expect(catalog.maximumWriteBodyBytes <= ProfileFieldCatalog.largestWriteBodyBytes)
        let request = try ProfileWriteRequest.parse(body: Array(body.utf8), ifMatchVersion: nil, ifNoneMatchAny: false, catalog: catalog)
        guard case .update(let changes, 12) = request else {
            Issue.record("expected an update at version 12, got \(request)")
            return
        }
        #expect(changes.fields.count == catalog.declarations.count)
    }

    @Test func aPutSetsTheFieldsItNamesAndLeavesTheRest() throws {
        let request = try put(#"{"display_name":"Ada","bio":"Poetical science.\nAnalyst.","website":null,"version":3}"#)
        #expect(
            request
                == .update(
                    ProfileChanges(
                        displayName: "Ada", fields: [.init(name: "bio", value: "Poetical science.\nAnalyst."), .init(name: "website", value: nil)]),
                    expectedVersion: 3))
        // A client that knows only the name sends only the name: no field changes.
        #expect(try put(#"{"display_name":"Ada","version":3}"#) == .update(ProfileChanges(displayName: "Ada"), expectedVersion: 3))
        // What a GET answered may come back as it was: the service's own members are ignored.
        #expect(
            try put(#"{"id":7,"display_name":"Ada","updated_at":"2026-11-28T10:00:00.000000Z","version":3}"#)
                == .update(ProfileChanges(displayName: "Ada"), expectedVersion: 3))
    }

    @Test func aMemberThatIsNoFieldIsRefusedNamingIt() {
        #expect(refusal { try put(#"{"display_name":"Ada","pronouns":"she/her","version":3}"#) }
            == .invalidField("pronouns", "is not a field of a profile"))
        #expect(refusal { try patch(#"{"pronouns":"she/her"}"#) } == .invalidField("pronouns", "is not a field of a profile"))
        #expect(refusal { try patch(#"{"bio":7}"#) } == .malformed(field: "bio", "bio must be a string, or null to unset it"))
        // Declared, it is taken.
        let withPronouns = try! ProfileFieldCatalog(
            ProfileFieldCatalog.standard.declarations + [.init(name: "pronouns", kind: .text, maximumLength: 40)])
        #expect((try? patch(#"{"pronouns":"she/her"}"#, catalog: withPronouns)) == ProfileChanges(fields: [.init(name: "pronouns", value: "she/her")]))
    }

    @Test func eachKindHasItsRules() {
        // A paragraph takes line feeds; one line does not; neither takes other controls.
        #expect(refusal { try patch(#"{"location":"Lisbon\nPortugal"}"#) } == .invalidField("location", "must not contain control, format or invisible characters"))
        #expect(refusal { try patch(#"{"bio":"tab\there"}"#) }
            == .invalidField("bio", "must not contain control, format or invisible characters (a line feed is allowed)"))
        #expect(refusal { try patch(#"{"bio":"right-to-left \u202E override"}"#) }
            == .invalidField("bio", "must not contain control, format or invisible characters (a line feed is allowed)"))
        // The bound counts code points, as sent and in NFC.
        let bio500 = String(repeating: "é", count: 500)
        #expect((try? patch(#"{"bio":"\#(bio500)"}"#)) != nil)
        #expect(refusal { try patch(#"{"bio":"\#(bio500)x"}"#) }
            == .invalidField("bio", "must be at most 500 characters long, as sent and in Unicode NFC"))
        #expect((try? patch(#"{"bio":"Rene\u0301e"}"#)) == ProfileChanges(fields: [.init(name: "bio", value: "Ren\u{E9}e")]), "stored in NFC")
        // URLs: https, a host, no user information, printable ASCII.
        #expect((try? patch(#"{"avatar_url":"https://cdn.example.com/a/1.png?s=64"}"#)) != nil)
        for bad in ["http://example.com/a.png", "https://", "https:///path", "https://user:pw@example.com/", "https://exa mple.com/",
            "javascript:alert(1)", "https://example.com/ä", "ftp://example.com"]
        {
            guard case .invalidField("avatar_url", _)? = refusal({ try patch(#"{"avatar_url":"\#(bad)"}"#) }) else {
                Issue.record("expected \(bad) to be refused")
                continue
            }
        }
        #expect(refusal { try patch(#"{"website":"https://example.com/\#(String(repeating: "a", count: 2_040))"}"#) }
            == .invalidField("website", "must be at most 2048 characters long"))
    }

    /// `email` and `date`: the stated rules, and the patterns openapi.yaml gives agree with them.
    @Test(arguments: [
        ("ada@example.com", true), ("a.b+tag@mail.example.co.uk", true), ("o'brien@xn--bcher-kva.example", true),
        ("ada@localhost", false), (".ada@example.com", false), ("a..b@example.com", false), ("ada.@example.com", false),
        ("ada@-example.com", false), ("ada@example..com", false), ("\"ada\"@example.com", false), ("ada@[192.0.2.1]", false),
        ("ada@exämple.com", false), ("ada example@example.com", false), ("@example.com", false), ("ada@", false),
        (String(repeating: "a", count: 65) + "@example.com", false), (String(repeating: "a", count: 64) + "@example.com", true),
    ])
    func emailAddresses(address: String, valid: Bool) throws {
        #expect(ProfileValidation.isEmailAddress(address) == valid)
        let pattern = try NSRegularExpression(pattern: ProfileValidation.emailPattern)
        let matches = pattern.firstMatch(in: address, range: NSRange(address.startIndex..., in: address)) != nil
        #expect(matches == valid, "openapi.yaml's pattern")
    }

    @Test(arguments: [
        ("1990-04-21", true), ("2024-02-29", true), ("2000-02-29", true), ("1900-02-29", false), ("2023-02-29", false),
        ("2023-04-31", false), ("2023-13-01", false), ("0000-01-01", false), ("1990-4-21", false), ("1990-04-21T00:00", false),
        ("19900421", false),
    ])
    func calendarDates(date: String, valid: Bool) {
        #expect(ProfileValidation.isCalendarDate(date) == valid)
    }

    @Test func aPatchUnsetsWithNullAndAnEmptyPatchChangesNothing() {
        #expect((try? patch(#"{"website":null}"#)) == ProfileChanges(fields: [.init(name: "website", value: nil)]))
        // RFC 7396: `{}` is a patch that leaves the profile as it is, not an error.
        #expect((try? patch("{}"))?.isEmpty == true)
        #expect((try? patch(" { } ", catalog: .none))?.isEmpty == true)
        #expect(refusal { try patch(#"{"display_name":null}"#) } == .invalidField("display_name", "cannot be removed"))
        #expect(refusal { try put(#"{"display_name":null,"version":1}"#) }
            == .malformed(field: "display_name", "display_name has the wrong type or value"))
    }

    @Test func theProfileJSONCarriesEveryDeclaredFieldInOrderUnsetAsNull() throws {
        var fields = ProfileFieldCatalog.standard.unsetFields
        fields.apply([.init(name: "bio", value: "Hi \"there\""), .init(name: "location", value: "Lisbon")])
        let profile = Profile(id: 1, username: "ada", displayName: "Ada", fields: fields, version: 2, updatedAt: "2026-11-28T10:00:00.000000Z")
        let text = String(decoding: profile.ownerJSON, as: UTF8.self)
        #expect(
            text
                == #"{"id":1,"username":"ada","display_name":"Ada","bio":"Hi \"there\"","avatar_url":null,"location":"Lisbon","website":null,"version":2,"updated_at":"2026-11-28T10:00:00.000000Z"}"#
        )
        let changes = ProfileChanges(displayName: nil, fields: [.init(name: "bio", value: "x"), .init(name: "website", value: nil)])
        #expect(changes.fieldsJSON == #"{"bio":"x","website":null}"#)
        #expect(changes.applied(to: profile).fields["bio"] == "x" && changes.applied(to: profile).displayName == "Ada")
    }
}

/// Field names that are SQL keywords or functions, and YAML's special words.
@Suite struct ProfileFieldNamesTests {
    private let keywords = try! ProfileFieldCatalog(
        ["user", "order", "end", "null", "on", "true"].map { ProfileFieldDeclaration(name: $0, kind: .text, maximumLength: 10) })

    /// Bare, `user` is the role and `order` a syntax error; every statement quotes every field.
    @Test func everyStatementQuotesEveryField() {
        let statements = ProfileStatements(keywords)
        for statement in statements.all {
            for name in ["user", "order", "end"] {
                let bare = statement.sql.split(whereSeparator: { !($0.isLetter || $0 == "_" || $0 == "\"" || $0 == "'") })
                    .filter { $0 == name }
                #expect(bare.isEmpty, "\(statement.name) names \(name) unquoted: \(statement.sql)")
            }
        }
        #expect(statements.select.sql.contains(#", "user", "order", "end""#))
    }

    /// YAML 1.1 reads a bare `on` as true and `null` as null: every key is quoted.
    @Test func theOpenAPIKeysAreQuoted() {
        for declaration in keywords.declarations {
            #expect(declaration.openAPIProperty.hasPrefix("'\(declaration.name)': {"), "\(declaration.openAPIProperty)")
        }
    }
}

/// The body limits the documents state (openapi.yaml, docs/api.md, docs/deployment.md).
@Suite struct WriteBodyLimitTests {
    @Test func theDocumentedLimitsAreTheService() {
        #expect(ProfileFieldCatalog.standard.maximumWriteBodyBytes == 62_098)
        #expect(ProfileFieldCatalog.largestWriteBodyBytes == 126_130)
        #expect(ProfileFieldCatalog.largestWriteBodyBytes <= 128 * 1024, "deploy/nginx.conf's client_max_body_size 128k")
    }
}
