import Foundation
import Testing

@testable import ProfileService

/// The one-pass reading of a write's body takes only what Foundation's parser reads the same way,
/// and leaves everything else to it.
@Suite struct ProfileWriteFieldsTests {
    private func scanned(_ json: String) -> ProfileWriteFields? {
        ProfileWriteFields(scanningFlatObject: Array(json.utf8))
    }

    private func foundation(_ bytes: [UInt8]) -> ProfileWriteFields? {
        try? JSONDecoder().decode(ProfileWriteFields.self, from: Data(bytes))
    }

    @Test func theBodiesClientsSendAreReadInOnePass() {
        #expect(scanned(#"{"display_name":"Ada","version":3}"#) == ProfileWriteFields(displayName: "Ada", version: 3))
        #expect(scanned(#" { "username" : "ada" ,"display_name":"Zoë 🚀", "version": 0 }"#)
            == ProfileWriteFields(displayName: "Zoë 🚀", username: "ada", version: 0))
        #expect(scanned("{\r\n\t\"display_name\": \"Ada\",\n \"bio\": {\"x\": 1}\n}") == nil, "a nested value is Foundation's")
        #expect(scanned(#"{"display_name":"Ada","note":"hi","n":-12,"ok":true,"no":false,"none":null}"#)
            == ProfileWriteFields(
                displayName: "Ada",
                others: [
                    .init(name: "n", value: .integer(-12)), .init(name: "no", value: .other), .init(name: "none", value: .null),
                    .init(name: "note", value: .string("hi")), .init(name: "ok", value: .other),
                ]), "every other member, for the declared fields to decide on")
        #expect(scanned("{}") == ProfileWriteFields())
        #expect(scanned(#"{"version":-0}"#) == ProfileWriteFields(version: 0))
        #expect(scanned(#"{"version":999999999999999}"#) == ProfileWriteFields(version: 999_999_999_999_999))
    }

    @Test func whatItDoesNotReadExactlyIsLeftToFoundation() {
        for json in [
            #"{"display_name":"A\"da"}"#, #"{"display_name":"\u0041da"}"#, #"{"display_náme":"Ada"}"#,
            #"{"display_name":"Ada","version":1.5}"#, #"{"version":1e2}"#, #"{"version":1.0}"#,
            #"{"version":0123}"#, #"{"version":-}"#, #"{"version":1000000000000000}"#,
            #"{"display_name":null}"#, #"{"display_name":3}"#, #"{"version":"3"}"#, #"{"username":true}"#,
            #"{"display_name":"a","display_name":"b"}"#, #"{"display_name":"Ada",}"#, #"{"display_name":"Ada""#,
            #"{"display_name":"Ada"} x"#, "[1]", "", " ", #"{"a":[1]}"#, "{\"display_name\":\"A\u{1}\"}",
            #"{"a":tru}"#, #"{"a" 1}"#, #"{,}"#, "\u{FEFF}{}",
        ] {
            #expect(scanned(json) == nil, "\(json)")
        }
        #expect(ProfileWriteFields(scanningFlatObject: [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xC3, 0x28, 0x22, 0x7D]) == nil,
            "invalid UTF-8 in a value")
    }

    /// Bodies mutated at random, byte by byte, towards JSON's edge cases: whenever the one-pass
    /// reading takes one, Foundation reads the same fields from it.
    @Test func whateverItTakesFoundationReadsTheSame() {
        var generator = SystemRandomNumberGenerator()
        let seeds = [
            #"{"display_name":"Ada Lovelace","version":12}"#, #"{"username":"ada","display_name":"Ada","version":0}"#,
            #"{ "display_name" : "Zoë", "extra": [1, {"a": null}], "version" : 7 }"#,
        ].map { Array($0.utf8) }
        let alphabet = Array(#"{}[]:,"\ -.0123456789eEtruefalsn"#.utf8) + [0x09, 0x0A, 0x00, 0xC3, 0xA9, 0xFF]
        var taken = 0
        for _ in 0..<20_000 {
            var body = seeds.randomElement(using: &generator)!
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let at = Int.random(in: 0..<body.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: body.insert(alphabet.randomElement(using: &generator)!, at: at)
                case 1 where body.count > 1: body.remove(at: at)
                default: body[at] = alphabet.randomElement(using: &generator)!
                }
            }
            guard let fields = ProfileWriteFields(scanningFlatObject: body) else { continue }
            taken += 1
            #expect(foundation(body) == fields, "\(String(decoding: body, as: UTF8.self))")
        }
        #expect(taken > 1_000, "the mutations leave many bodies the one-pass reading takes")
    }
}

/// A body of thousands of members that are no field: read in one pass over its bytes, keeping
/// only as many members as can decide that it is refused.
@Suite struct HostileBodyTests {
    /// 7,696 distinct two- and three-letter members, ~60 KB: what a review sent in parallel.
    private static let manyMembers: [String] = {
        let letters = "abcdefghijklmnopqrstuvwxyz".map(String.init)
        let names = letters.flatMap { a in letters.map { a + $0 } } + letters.flatMap { a in letters.flatMap { b in letters.map { a + b + $0 } } }
        return Array(names.filter { $0 != "bio" && $0 != "id" }.prefix(7_696))
    }()

    @Test func thousandsOfMembersAreReadKeepingOnlyWhatDecides() {
        let body = Array(("{" + Self.manyMembers.map { #""\#($0)":1"# }.joined(separator: ",") + "}").utf8)
        let limit = ProfileWriteRequest.othersWorthReading(.standard)
        let fields = ProfileWriteFields(scanningFlatObject: body, keepingOthers: limit)
        #expect(fields?.others.count == limit, "read in one pass, \(limit) members kept")
        // Escaped keys take Foundation's path: it keeps as few.
        let escaped = Array(("{" + Self.manyMembers.prefix(4_000).map { #""\u0078\#($0)":1"# }.joined(separator: ",") + "}").utf8)
        #expect(ProfileWriteFields(scanningFlatObject: escaped, keepingOthers: limit) == nil)
        let decoder = JSONDecoder()
        decoder.userInfo[ProfileWriteFields.othersKept] = limit
        #expect((try? decoder.decode(ProfileWriteFields.self, from: Data(escaped)))?.others.count == limit)
        // Either way the body is refused, naming a member that is no field.
        for hostile in [body, escaped] {
            do {
                _ = try ProfilePatch.parse(body: hostile, catalog: .standard)
                Issue.record("a body of 7,696 unknown members was accepted")
            } catch {
                guard case .invalidField(let name, "is not a field of a profile") = error else {
                    Issue.record("\(error)")
                    continue
                }
                #expect(Self.manyMembers.contains(name) || Self.manyMembers.contains(String(name.dropFirst())), "\(name)")
            }
        }
    }

    private func refusal(of body: [UInt8]) -> ProfileRequestError? {
        do {
            _ = try ProfilePatch.parse(body: body, catalog: .standard)
            return nil
        } catch {
            return error
        }
    }

    /// Past the members kept, the rest is still JSON to check: a broken tail is 400, as before.
    @Test func membersPastTheLimitAreStillCheckedAsJSON() {
        let head = Self.manyMembers.prefix(20).map { #""\#($0)":1"# }.joined(separator: ",")
        for tail in [#","zz":}"#, #","zz":1"#, #","zz":1}x"#, #","zz":tru}"#] {
            let body = Array(("{" + head + tail).utf8)
            #expect(ProfileWriteFields(scanningFlatObject: body, keepingOthers: 3) == nil, "\(tail)")
            guard case .malformed? = refusal(of: body) else {
                Issue.record("\(tail): expected 400, got \(String(describing: refusal(of: body)))")
                continue
            }
        }
    }
}
