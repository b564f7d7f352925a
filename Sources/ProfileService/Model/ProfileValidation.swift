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

    private static func checkDisplayName(_ value: String) throws(ProfileRequestError) {
        if value.unicodeScalars.contains(where: isForbiddenScalar) {
            throw .invalidField("display_name", "must not contain control characters")
        }
        guard displayNameLength.contains(value.unicodeScalars.count) else {
            throw .invalidField("display_name", "must be 1 to 64 characters long, as sent and in Unicode NFC")
        }
        if value.unicodeScalars.allSatisfy(\.properties.isWhitespace) {
            throw .invalidField("display_name", "must not be blank")
        }
    }

    /// Returns a declared field's value in NFC, or the reason it is not acceptable: the display
    /// name's care (the bound in code points as sent and as stored; no control characters,
    /// separators or bidirectional overrides — a paragraph may hold line feeds), and for a URL an
    /// absolute `https` URL with a host, in printable ASCII, without user information.
    static func validField(_ raw: String, _ declaration: ProfileFieldDeclaration) throws(ProfileRequestError) -> String {
        let name = declaration.name
        let bound = declaration.maximumLength
        switch declaration.kind {
        case .httpsURL:
            guard raw.utf8.count <= bound else { throw .invalidField(name, "must be at most \(bound) characters long") }
            guard isHTTPSURL(raw) else {
                throw .invalidField(
                    name, "must be an https URL: https://, a host of letters, digits, '.' and '-', an optional port, then printable ASCII")
            }
            return raw
        case .text, .paragraph:
            let allowsLineFeeds = declaration.kind == .paragraph
            return try inNFC(raw) { (value: String) throws(ProfileRequestError) in
                if value.unicodeScalars.contains(where: { isForbiddenScalar($0) && !(allowsLineFeeds && $0 == "\n") }) {
                    throw .invalidField(
                        name, allowsLineFeeds ? "must not contain control characters other than line feeds" : "must not contain control characters")
                }
                guard value.unicodeScalars.count <= bound else {
                    throw .invalidField(name, "must be at most \(bound) characters long, as sent and in Unicode NFC")
                }
            }
        }
    }

    /// `^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?([/?#][\x21-\x7E]*)?$`, the pattern `openapi.yaml`
    /// states: no user information (`https://bank.com@evil.example`), no spaces, no other scheme.
    static func isHTTPSURL(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        let scheme = Array("https://".utf8)
        guard bytes.starts(with: scheme) else { return false }
        var index = scheme.count
        let hostStart = index
        while index < bytes.count, isHostByte(bytes[index]) { index += 1 }
        guard index > hostStart else { return false }
        if index < bytes.count, bytes[index] == UInt8(ascii: ":") {
            index += 1
            let portStart = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard (1...5).contains(index - portStart) else { return false }
        }
        guard index < bytes.count else { return true }
        guard [UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#")].contains(bytes[index]) else { return false }
        return bytes[index...].allSatisfy { (0x21...0x7E).contains($0) }
    }

    private static func isHostByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
    }

    static func validUsername(_ raw: String) throws(ProfileRequestError) -> String {
        guard usernameLength.contains(raw.utf8.count),
            raw.utf8.allSatisfy({ byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
            })
        else {
            throw .invalidField("username", "must be 3 to 32 characters of a-z, 0-9, '_' and '.'")
        }
        return raw
    }

    /// C0 and C1 controls, DEL, line and paragraph separators, and bidirectional overrides,
    /// which can disguise a name when shown next to other text.
    private static func isForbiddenScalar(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: return true
        default: return (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
        }
    }
}
