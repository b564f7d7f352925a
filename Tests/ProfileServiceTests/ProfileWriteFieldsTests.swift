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
