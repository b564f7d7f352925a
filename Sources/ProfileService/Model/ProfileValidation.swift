import Foundation

/// The field rules of the API. Every violation names the field it is about.
enum ProfileValidation {
    static let displayNameLength = 1...64
    static let usernameLength = 3...32

    /// Returns the display name in Unicode NFC, or the reason it is not acceptable.
    ///
    /// The rules are the ones JSON Schema can state, so `openapi.yaml` says what is accepted
    /// (docs/design.md §7): the length counts Unicode code points (JSON Schema's `maxLength`), and
    /// "blank" means every code point has the White_Space property. Each rule holds for the value
    /// as sent and for the value stored, its NFC form: normalization can lengthen a string (U+FB2C
    /// is three code points in NFC), and the bound is a promise about what readers get.
    static func validDisplayName(_ raw: String) throws(ProfileRequestError) -> String {
        try inNFC(raw, checking: checkDisplayName)
    }

    /// `raw` in NFC, after `check` held for it as sent and (when normalizing changed its length)
    /// for its NFC form.
    private static func inNFC(_ raw: String, checking check: (String) throws(ProfileRequestError) -> Void)
        throws(ProfileRequestError) -> String
    {
        try check(raw)
        guard !isNFCByItsCodePoints(raw) else { return raw }
        let normalized = raw.precomposedStringWithCanonicalMapping
        if normalized.unicodeScalars.count != raw.unicodeScalars.count { try check(normalized) }
        return normalized
    }

    /// Whether `value` is in NFC for certain without normalizing it: every code point below U+0300
    /// (ASCII, Latin-1, Latin Extended) is its own NFC form, and none of them combines with
    /// another — the combining marks begin at U+0300. Most names are; the rest go to Foundation.
    static func isNFCByItsCodePoints(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 < 0xCC }  // UTF-8 lead and continuation bytes of U+0000–U+02FF
    }

    /// One pass over the name; a blank name that is also too long is refused for its length.
    private static func checkDisplayName(_ value: String) throws(ProfileRequestError) {
        let violation = VisibleText.violation(in: value, allowsLineFeeds: false, requiresVisible: true)
        if let violation, violation != VisibleText.blankRule { throw .invalidField("display_name", violation) }
        guard displayNameLength.contains(value.unicodeScalars.count) else {
            throw .invalidField("display_name", "must be 1 to 64 characters long, as sent and in Unicode NFC")
        }
        if let violation { throw .invalidField("display_name", violation) }
    }

    /// Returns a declared field's value in NFC, or the reason it is not acceptable: the display
    /// name's care (the bound in code points as sent and as stored; ``VisibleText``'s rule — a
    /// paragraph may hold line feeds), and for a URL an absolute `https` URL with a real host
    /// name and port, without user information (``isHTTPSURL(_:)``).
    static func validField(_ raw: String, _ declaration: ProfileFieldDeclaration) throws(ProfileRequestError) -> String {
        let name = declaration.name
        let bound = declaration.maximumLength
        switch declaration.kind {
        case .httpsURL:
            return try ascii(
                raw, declaration, isValid: isHTTPSURL,
                rule: "must be an https URL: https://, a host name (labels of letters, digits and '-' between dots), an optional port 1-65535, then printable ASCII without spaces or \"<>\\^`{|}")
        case .email:
            return try ascii(
                raw, declaration, isValid: isEmailAddress,
                rule: "must be an email address: local@example.com, ASCII (an international domain in its xn-- form), no quoted local part")
        case .date:
            guard isCalendarDate(raw) else { throw .invalidField(name, "must be a calendar date YYYY-MM-DD, such as 1990-04-21") }
            return raw
        case .text, .paragraph:
            let allowsLineFeeds = declaration.kind == .paragraph
            return try inNFC(raw) { (value: String) throws(ProfileRequestError) in
                if let violation = VisibleText.violation(in: value, allowsLineFeeds: allowsLineFeeds, requiresVisible: false) {
                    throw .invalidField(name, violation)
                }
                guard value.unicodeScalars.count <= bound else {
                    throw .invalidField(name, "must be at most \(bound) characters long, as sent and in Unicode NFC")
                }
            }
        }
    }

    /// A value of an ASCII kind (a URL, an email address) within the declaration's bound, in
    /// characters, that `isValid` accepts; `rule` says what it must be.
    private static func ascii(
        _ raw: String, _ declaration: ProfileFieldDeclaration, isValid: (String) -> Bool, rule: String
    ) throws(ProfileRequestError) -> String {
        guard raw.utf8.count <= declaration.maximumLength else {
            throw .invalidField(declaration.name, "must be at most \(declaration.maximumLength) characters long")
        }
        guard isValid(raw) else { throw .invalidField(declaration.name, rule) }
        return raw
    }

    /// An absolute `https` URL of a real host: the pattern ``httpsURLPattern`` that
    /// `openapi.yaml` states. The host is dot-separated labels of letters, digits and `-`
    /// (1–63 each, no `-` at either end: not `https://-` or `https://..`), the port 1–65535, and
    /// the rest printable ASCII without the characters RFC 3986 never allows in a URL (space,
    /// `"`, `<`, `>`, `\`, `^`, `` ` ``, `{`, `|`, `}`), which a page could break out of an
    /// attribute with. No user information (`https://bank.com@evil.example`), no other scheme.
    static func isHTTPSURL(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        let scheme = Array("https://".utf8)
        guard bytes.starts(with: scheme) else { return false }
        var index = scheme.count
        // Labels, each 1-63 of [A-Za-z0-9-] not starting or ending with '-', between single dots.
        while true {
            let start = index
            while index < bytes.count, isLabelByte(bytes[index]) { index += 1 }
            let label = bytes[start..<index]
            guard (1...63).contains(label.count), label.first != UInt8(ascii: "-"), label.last != UInt8(ascii: "-") else { return false }
            guard index < bytes.count, bytes[index] == UInt8(ascii: ".") else { break }
            index += 1
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ":") {
            index += 1
            let portStart = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            let digits = bytes[portStart..<index]
            guard (1...5).contains(digits.count), digits.first != UInt8(ascii: "0"),
                let port = Int(String(decoding: digits, as: UTF8.self)), port <= 65_535
            else { return false }
        }
        guard index < bytes.count else { return true }
        guard [UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#")].contains(bytes[index]) else { return false }
        return bytes[index...].allSatisfy(isURLByte)
    }

    /// ``isHTTPSURL(_:)`` as a pattern (ECMA-262 and Python's `re` alike).
    static let httpsURLPattern =
        #"^https://[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"#
        + #"(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?"#
        + #"(?:[/?#][!#-;=?-\[\]_a-z~]*)?(?![\s\S])"#

    static func isLabelByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
    }

    /// Printable ASCII but for `"<>\^`{|}`.
    private static func isURLByte(_ byte: UInt8) -> Bool {
        guard (0x21...0x7E).contains(byte) else { return false }
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "\\"), UInt8(ascii: "^"), UInt8(ascii: "`"),
            UInt8(ascii: "{"), UInt8(ascii: "|"), UInt8(ascii: "}"):
            return false
        default:
            return true
        }
    }

    /// A username as its owner spells it: 3 to 32 of `A-Z a-z 0-9 _ .` (its handle, which
    /// lookups compare, is ``ProfileHandle``).
    static func validUsername(_ raw: String) throws(ProfileRequestError) -> String {
        guard isUsername(raw) else {
            throw .invalidField("username", "must be 3 to 32 characters of A-Z, a-z, 0-9, '_' and '.'")
        }
        return raw
    }

    static func isUsername(_ raw: some StringProtocol) -> Bool {
        usernameLength.contains(raw.utf8.count)
            && raw.utf8.allSatisfy({ byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
            })
    }
}
