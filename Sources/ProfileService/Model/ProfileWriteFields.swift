/// The members of a profile write's body, as it gave them (before validation): the profile's
/// own three and every other one, which the declared fields decide on (``ProfileFieldCatalog``).
struct ProfileWriteFields: Equatable {
    var displayName: String?
    /// `"display_name": null`: refused by a write (400) and by a patch (422: it cannot be removed).
    var removesDisplayName = false
    var username: String?
    var version: Int64?
    /// The other members, in the body's order — at most as many as the reading kept
    /// (``ProfileWriteRequest/othersWorthReading(_:)``): past that, the body is refused anyway.
    var others: [Member] = []

    struct Member: Equatable {
        let name: String
        let value: MemberValue
    }

    enum MemberValue: Equatable {
        case string(String)
        case null
        /// An integer (an `id` sent back as it was read); no field takes one.
        case integer(Int64)
        /// Another number, a boolean, an object or an array: no field takes one.
        case other
    }
}

extension ProfileWriteFields {
    /// Reads the body every client sends — one flat JSON object of plain strings and integers —
    /// in one pass over its bytes, without Foundation's parser (a PUT spent 7 % of its CPU there).
    ///
    /// Returns `nil` for anything else: escapes, non-ASCII keys, nested values, fractions and
    /// exponents, a known field given twice, `null` or the wrong type for a known field, or input
    /// that is not JSON. Foundation's parser then decides, with its own error for the field, so
    /// every body gets the answer it got before; this path only takes what it reads exactly as
    /// Foundation would.
    ///
    /// `keepingOthers` bounds the other members kept: the rest are checked as JSON and dropped,
    /// so a body of thousands of members costs its bytes, not thousands of strings and a sort.
    init?(scanningFlatObject body: [UInt8], keepingOthers limit: Int = .max) {
        var scanner = FlatObjectScanner(body, keepingOthers: limit)
        guard let fields = scanner.scan() else { return nil }
        self = fields
    }
}

/// A cursor over a flat JSON object; see ``ProfileWriteFields/init(scanningFlatObject:)``.
private struct FlatObjectScanner {
    private let bytes: [UInt8]
    private let othersKept: Int
    private var position = 0

    init(_ bytes: [UInt8], keepingOthers limit: Int) {
        self.bytes = bytes
        self.othersKept = limit
    }

    private enum Value {
        case string(String)
        case integer(Int64)
        case null
        /// More than 15 digits, which a Double may not hold exactly.
        case longInteger
        case other  // true or false
    }

    /// The fields the service reads, by their key's bytes.
    private enum Field {
        case displayName, username, version

        init?(key: ArraySlice<UInt8>) {
            if key.elementsEqual("display_name".utf8) {
                self = .displayName
            } else if key.elementsEqual("username".utf8) {
                self = .username
            } else if key.elementsEqual("version".utf8) {
                self = .version
            } else {
                return nil
            }
        }
    }

    mutating func scan() -> ProfileWriteFields? {
        var fields = ProfileWriteFields()
        // The other members' names so far: a name given twice is found in constant time, so a
        // body of thousands of members costs time linear in its size (a hostile body too).
        var otherNames = Set<String>()
        skipWhitespace()
        guard take(UInt8(ascii: "{")) else { return nil }
        skipWhitespace()
        if !take(UInt8(ascii: "}")) {
            repeat {
                skipWhitespace()
                guard let key = plainString(), !key.contains(where: { $0 >= 0x80 }) else { return nil }
                skipWhitespace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipWhitespace()
                guard let value = value() else { return nil }
                // A known field twice, or of another type, is Foundation's to answer.
                switch (Field(key: key), value) {
                case (nil, _) where fields.others.count >= othersKept:
                    if case .longInteger = value { return nil }  // as for a kept member: Foundation's
                case (nil, _):
                    let name = String(decoding: key, as: UTF8.self)
                    guard otherNames.insert(name).inserted else { return nil }  // twice: Foundation's
                    let member: ProfileWriteFields.MemberValue
                    switch value {
                    case .string(let text): member = .string(text)
                    case .null: member = .null
                    case .integer(let number): member = .integer(number)
                    case .longInteger: return nil  // Foundation's, which reads it exactly
                    case .other: member = .other
                    }
                    fields.others.append(.init(name: name, value: member))
                case (.displayName?, .string(let text)) where fields.displayName == nil: fields.displayName = text
                case (.username?, .string(let text)) where fields.username == nil: fields.username = text
                case (.version?, .integer(let number)) where fields.version == nil: fields.version = number
                default: return nil
                }
                skipWhitespace()
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")) else { return nil }
        }
        skipWhitespace()
        fields.others.sort { $0.name < $1.name }  // as Foundation's reading orders them
        return position == bytes.count ? fields : nil
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    private mutating func skipWhitespace() {
        while position < bytes.count, JSONSyntax.isWhitespace(bytes[position]) { position += 1 }
    }

    /// A string without escapes or control characters: its bytes, between the quotes.
    private mutating func plainString() -> ArraySlice<UInt8>? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = position
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                position += 1
                return bytes[start..<position - 1]
            }
            guard byte != UInt8(ascii: "\\"), byte >= 0x20 else { return nil }
            position += 1
        }
        return nil
    }

    private mutating func value() -> Value? {
        guard position < bytes.count else { return nil }
        switch bytes[position] {
        case UInt8(ascii: "\""):
            guard let raw = plainString(), let text = String(validating: raw, as: UTF8.self) else { return nil }
            return .string(text)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return integer()
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null").map { _ in .null }
        default: return nil  // an object, an array, or not JSON
        }
    }

    /// `-?(0|[1-9][0-9]*)` of at most 15 digits, which a Double holds exactly as Foundation reads
    /// it; a fraction or an exponent is left to Foundation.
    private mutating func integer() -> Value? {
        let negative = take(UInt8(ascii: "-"))
        let start = position
        var magnitude: Int64 = 0
        while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
            magnitude = magnitude &* 10 &+ Int64(bytes[position] - UInt8(ascii: "0"))
            position += 1
        }
        let digits = position - start
        guard digits > 0, digits == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        if position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
            default: break
            }
        }
        guard digits <= 15 else { return .longInteger }
        return .integer(negative ? -magnitude : magnitude)
    }

    private mutating func literal(_ word: String) -> Value? {
        let count = word.utf8.count
        guard position + count <= bytes.count, bytes[position..<position + count].elementsEqual(word.utf8) else { return nil }
        position += count
        return .other
    }
}

/// RFC 8259's bytes, for the scans of a write's body.
enum JSONSyntax {
    /// Space, tab, line feed or carriage return: the only whitespace JSON allows between tokens.
    static func isWhitespace(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): true
        default: false
        }
    }
}
