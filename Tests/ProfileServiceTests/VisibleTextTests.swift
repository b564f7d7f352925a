import Foundation
import Testing
import TestSupport

@testable import ProfileService

/// What a display name and a text field may hold (``VisibleText``), the URL rule, and the
/// patterns `openapi.yaml` states for both, held to the validators.
@Suite struct VisibleTextTests {
    private func displayNameRefusal(_ name: String) -> String? {
        do {
            _ = try ProfileValidation.validDisplayName(name)
            return nil
        } catch {
            guard case .invalidField("display_name", let rule) = error else { return "\(error)" }
            return rule
        }
    }

    /// Names that render empty or pass for another's: each was accepted once.
    @Test(arguments: [
        "\u{200B}", "\u{3164}", "\u{2800}", "\u{2800}\u{2800}", "admin\u{200D}", "\u{200D}admin", "ad\u{200D} min",
        "admin\u{200F}", "admin\u{061C}", "admin\u{E0001}", "ad\u{E0061}min", "\u{FE0F}admin", "admin\u{00AD}",
        "ad\u{2060}min", "\u{115F}", "\u{FFA0}", "admin\u{180E}", "a\u{200D}\u{200D}b", "\u{FEFF}admin",
    ])
    func invisibleNamesAreRefused(name: String) {
        #expect(displayNameRefusal(name) != nil, "\(name.unicodeScalars.map { String($0.value, radix: 16) })")
    }

    /// What joiners and selectors are for: emoji sequences, keycaps, a Persian word.
    @Test(arguments: [
        "Ada ❤️", "👩‍💻 Ada", "👁️‍🗨️", "می‌خواهم", "1️⃣", "Zoë", "🇵🇹 Ana", "👩🏽‍🚀", "葛\u{E0100}", "Ada\u{00A0}King",
    ])
    func namesThatUseJoinersAndSelectorsAreAccepted(name: String) {
        #expect(displayNameRefusal(name) == nil, "\(name)")
    }

    /// Every code point the standard library calls a control, format, separator or
    /// default-ignorable is forbidden, a joiner or a variation selector in the table.
    @Test func theTableHoldsEveryInvisibleCodePoint() {
        var missing: [String] = []
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let properties = scalar.properties
            let invisible: Bool
            switch properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator: invisible = true
            default: invisible = properties.isDefaultIgnorableCodePoint
            }
            guard invisible else { continue }
            if VisibleText.role(of: scalar, allowsLineFeeds: false) == .visible
                || VisibleText.role(of: scalar, allowsLineFeeds: false) == .blank
            {
                missing.append(String(value, radix: 16))
            }
        }
        #expect(missing.isEmpty, "not in VisibleText's table: \(missing)")
    }

    @Test(arguments: [
        "https://-", "https://..", "https://x:99999", "https://x:0", "https://x:080", "https://-a.com", "https://a-.com",
        "https://a..b", "https://.a", "https://a.com/\"x\"", "https://a.com/<script>", "https://a.com/>", "https://a.com/`",
        "https://a.com/{x}", "https://a.com/a|b", "https://a.com/\\", "https://a.com/^", "https://bank.com@evil.example",
        "http://a.com", "https://", "https://a.com/ x", "https://\(String(repeating: "a", count: 64)).com",
    ])
    func urlsWithoutARealHostOrWithUnsafeCharactersAreRefused(url: String) {
        #expect(!ProfileValidation.isHTTPSURL(url), "\(url)")
    }

    @Test(arguments: [
        "https://example.com", "https://a-b.c0m:8443/path?q=1&r=%20#frag", "https://127.0.0.1/", "https://x:65535",
        "https://x:1", "https://EXAMPLE.com/[a]", "https://\(String(repeating: "a", count: 63)).com/~me",
    ])
    func urlsOfARealHostAreAccepted(url: String) {
        #expect(ProfileValidation.isHTTPSURL(url), "\(url)")
    }

    private func matches(_ pattern: String, _ text: String) throws -> Bool {
        let regex = try NSRegularExpression(pattern: pattern)
        return regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
    }

    /// The patterns of `openapi.yaml` accept exactly what the validators accept, on the cases
    /// above and on strings drawn at random from the code points that matter.
    @Test func thePatternsAgreeWithTheValidators() throws {
        let alphabet: [Unicode.Scalar] = [
            "a", "Z", " ", "\n", "\t", "\u{A0}", "\u{2800}", "\u{200B}", "\u{200C}", "\u{200D}", "\u{FE0F}", "\u{E0100}",
            "\u{E0061}", "\u{3164}", "\u{202E}", "\u{1F469}", "\u{1F4BB}", "\u{2764}", "\u{0301}", "\u{3000}", "\u{FEFF}", "\u{85}",
            "\u{2028}", "é", "\u{13430}", "\u{1D173}",
        ]
        var generator = SystemRandomNumberGenerator()
        var samples = ["", "Ada", "Ada ❤️", "👩‍💻", "admin\u{200D}", "\u{2800}", " a ", "a\nb"]
        for _ in 0..<3_000 {
            let length = Int.random(in: 1...6, using: &generator)
            var text = ""
            for _ in 0..<length { text.unicodeScalars.append(alphabet.randomElement(using: &generator)!) }
            samples.append(text)
        }
        for (allowsLineFeeds, requiresVisible) in [(false, true), (false, false), (true, false)] {
            let pattern = VisibleText.pattern(allowsLineFeeds: allowsLineFeeds, requiresVisible: requiresVisible)
            for text in samples {
                let valid = VisibleText.violation(in: text, allowsLineFeeds: allowsLineFeeds, requiresVisible: requiresVisible) == nil
                #expect(try matches(pattern, text) == valid, "\(text.unicodeScalars.map { String($0.value, radix: 16) }) \(allowsLineFeeds) \(requiresVisible)")
            }
        }
        for url in ["https://-", "https://..", "https://x:99999", "https://a.com/<", "https://example.com:443/a?b#c", "https://a.b.c"] {
            #expect(try matches(ProfileValidation.httpsURLPattern, url) == ProfileValidation.isHTTPSURL(url), "\(url)")
        }
    }

    /// `openapi.yaml` states the patterns the service checks: the display name's, and every
    /// declared field's line as `profile-service openapi` writes it.
    @Test func openAPIStatesThePatterns() throws {
        let document = try String(
            contentsOf: TestEnvironment.repositoryRoot.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let displayName = "      pattern: " + VisibleText.yamlDoubleQuoted(VisibleText.pattern(allowsLineFeeds: false, requiresVisible: true))
        #expect(document.contains(displayName + "\n"), "DisplayName's pattern should be:\n\(displayName)")
        for declaration in ProfileFieldCatalog.standard.declarations {
            let line = "        " + declaration.openAPIProperty
            #expect(document.components(separatedBy: line + "\n").count - 1 == 4, "expected 4 times:\n\(line)")
        }
    }
}
