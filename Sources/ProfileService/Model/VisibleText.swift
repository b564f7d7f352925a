/// What a display name and a text field may hold, code point by code point: characters a reader
/// sees, white space between them, and the few invisible ones that only shape their neighbours
/// (docs/design.md §7). `openapi.yaml` states the same rule as a pattern, written from here
/// (``pattern(allowsLineFeeds:requiresVisible:)``).
///
/// - Never: C0 and C1 controls, line and paragraph separators, format characters (Unicode
///   category Cf: bidirectional marks, overrides and isolates, zero-width space, word joiner,
///   tags…) and default-ignorable code points (Hangul fillers, U+180B–U+180F, U+FFF0–U+FFF8…):
///   each renders as nothing, so `"\u{200B}"` would be an empty name and `"admin\u{200D}"`
///   another account's twin.
/// - A variation selector (U+FE00–U+FE0F, U+E0100–U+E01EF) only right after a visible character
///   (❤️ is U+2764 U+FE0F); a joiner (U+200C, U+200D) only between two visible characters (an
///   emoji sequence such as 👩‍💻, a Persian word).
/// - White space, and U+2800 (the blank braille pattern, which renders as a space), is blank: a
///   display name needs one visible character.
enum VisibleText {
    /// How one code point counts.
    enum Role: Equatable {
        case visible, blank, joiner, variationSelector, forbidden
    }

    /// Cc, Zl, Zp, Cf and Default_Ignorable_Code_Point, less the joiners and variation selectors.
    /// A unit test holds it to the standard library's Unicode properties.
    static let forbidden: [ClosedRange<UInt32>] = [
        0x0...0x1F, 0x7F...0x9F, 0xAD...0xAD, 0x34F...0x34F, 0x600...0x605, 0x61C...0x61C, 0x6DD...0x6DD,
        0x70F...0x70F, 0x890...0x891, 0x8E2...0x8E2, 0x115F...0x1160, 0x17B4...0x17B5, 0x180B...0x180F,
        0x200B...0x200B, 0x200E...0x200F, 0x2028...0x202E, 0x2060...0x206F, 0x3164...0x3164, 0xFEFF...0xFEFF,
        0xFFA0...0xFFA0, 0xFFF0...0xFFFB, 0x110BD...0x110BD, 0x110CD...0x110CD, 0x13430...0x1343F,
        0x1BCA0...0x1BCA3, 0x1D173...0x1D17A, 0xE0000...0xE00FF, 0xE01F0...0xE0FFF,
    ]
    static let joiners: [ClosedRange<UInt32>] = [0x200C...0x200D]
    static let variationSelectors: [ClosedRange<UInt32>] = [0xFE00...0xFE0F, 0xE0100...0xE01EF]
    /// White_Space outside the forbidden ranges, and the blank braille pattern.
    static let blanks: [ClosedRange<UInt32>] = [
        0x20...0x20, 0xA0...0xA0, 0x1680...0x1680, 0x2000...0x200A, 0x202F...0x202F, 0x205F...0x205F,
        0x2800...0x2800, 0x3000...0x3000,
    ]

    static func role(of scalar: Unicode.Scalar, allowsLineFeeds: Bool) -> Role {
        let value = scalar.value
        if value >= 0x7F || value < 0x20 {  // printable ASCII is visible or a space: most text stops here
            if allowsLineFeeds && scalar == "\n" { return .blank }
            if forbidden.contains(where: { $0.contains(value) }) { return .forbidden }
            if joiners.contains(where: { $0.contains(value) }) { return .joiner }
            if variationSelectors.contains(where: { $0.contains(value) }) { return .variationSelector }
        }
        return blanks.contains(where: { $0.contains(value) }) ? .blank : .visible
    }

    /// Why `text` breaks the rule, or nil. `requiresVisible`: at least one visible character.
    static func violation(in text: String, allowsLineFeeds: Bool, requiresVisible: Bool) -> String? {
        var previous: Role?
        var sawVisible = false
        var pendingJoiner = false
        for scalar in text.unicodeScalars {
            let role = role(of: scalar, allowsLineFeeds: allowsLineFeeds)
            if pendingJoiner && role != .visible { return joinerRule }
            pendingJoiner = false
            switch role {
            case .forbidden:
                return allowsLineFeeds
                    ? "must not contain control, format or invisible characters (a line feed is allowed)"
                    : "must not contain control, format or invisible characters"
            case .variationSelector:
                guard previous == .visible else { return "may hold a variation selector only right after a visible character" }
            case .joiner:
                guard previous == .visible || previous == .variationSelector else { return joinerRule }
                pendingJoiner = true
            case .visible:
                sawVisible = true
            case .blank:
                break
            }
            previous = role
        }
        if pendingJoiner { return joinerRule }
        if requiresVisible && !sawVisible { return blankRule }
        return nil
    }

    /// The violation of text with no visible character, when one is required.
    static let blankRule = "must not be blank"

    private static let joinerRule = "may hold a joiner (U+200C, U+200D) only between two visible characters"

    // MARK: The rule as a pattern

    /// The rule as an ECMA-262 pattern with the `u` flag (and Python's `re`): BMP code points
    /// as `\uXXXX`, others as themselves. `(?![\s\S])` ends the string (`$` would also match
    /// before a final line feed in some engines).
    static func pattern(allowsLineFeeds: Bool, requiresVisible: Bool) -> String {
        var forbidden = Self.forbidden
        var blanks = Self.blanks
        if allowsLineFeeds {
            forbidden = forbidden.flatMap { range -> [ClosedRange<UInt32>] in
                guard range.contains(0x0A) else { return [range] }
                return [range.lowerBound...0x09, 0x0B...range.upperBound]
            }
            blanks.insert(0x0A...0x0A, at: 0)
        }
        let blank = "[" + characterClass(blanks) + "]"
        let selector = "[" + characterClass(variationSelectors) + "]"
        let joiner = "[" + characterClass(joiners) + "]"
        let visible = "[^" + characterClass(forbidden + joiners + variationSelectors + blanks) + "]"
        let cluster = "\(visible)\(selector)?(?:\(joiner)\(visible)\(selector)?)*"
        return requiresVisible
            ? "^\(blank)*\(cluster)(?:\(blank)|\(cluster))*(?![\\s\\S])"
            : "^(?:\(blank)|\(cluster))*(?![\\s\\S])"
    }

    private static func characterClass(_ ranges: [ClosedRange<UInt32>]) -> String {
        func escaped(_ value: UInt32) -> String {
            if value > 0xFFFF { return String(Character(Unicode.Scalar(value)!)) }  // in range: a table entry
            let hex = String(value, radix: 16, uppercase: true)
            return value <= 0xFF ? "\\x" + String(repeating: "0", count: 2 - hex.count) + hex
                : "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        }
        return ranges.map { $0.count == 1 ? escaped($0.lowerBound) : escaped($0.lowerBound) + "-" + escaped($0.upperBound) }.joined()
    }

    /// `text` as a YAML double-quoted scalar: `\` and `"` escaped, a code point outside the BMP
    /// as `\UXXXXXXXX` (so the file stays readable and every YAML reader gets the code point).
    static func yamlDoubleQuoted(_ text: String) -> String {
        var quoted = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": quoted += "\\\\"
            case "\"": quoted += "\\\""
            case _ where scalar.value > 0xFFFF:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                quoted += "\\U" + String(repeating: "0", count: 8 - hex.count) + hex
            default: quoted.unicodeScalars.append(scalar)
            }
        }
        return quoted + "\""
    }
}
