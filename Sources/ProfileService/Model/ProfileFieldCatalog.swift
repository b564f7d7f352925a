/// The fields a profile carries beside its name: what the operator declared in the
/// `profile_fields` table (migrations/0005_profile_fields.sql), read once at start.
///
/// Adding a field is a migration that adds the column and declares it; no code changes
/// (docs/design.md §11). Every part of the service — the statements, the body parser, the JSON
/// writer, the change feed's decoder, the cache entry — takes its fields from here.
public struct ProfileFieldCatalog: Sendable, Hashable {
    public let declarations: [ProfileFieldDeclaration]
    /// The shape of a profile's JSON under these declarations (``ProfileFields/shape``): cache
    /// entries carry it, so an instance never serves an entry written under other declarations
    /// (a rolling restart after a field was added, docs/design.md §11.3).
    public let shape: UInt32
    /// Whether any field is read by its owner alone (docs/design.md §13): only then do a
    /// profile's answers depend on who asks (`Vary: Authorization`, two entity tags).
    public let hasOwnerOnlyFields: Bool
    /// Whether any field is written by administrators alone: only then is a write's body checked for them.
    public let hasAdminWrittenFields: Bool

    /// The declarations' lengths together, in code points: a whole profile stays a few tens of
    /// kilobytes at most, well inside a memcached item and a request body.
    public static let maximumTotalLength = 8_000

    /// At most this many fields: with the total length, it bounds a write's body (``maximumWriteBodyBytes``).
    public static let maximumFieldCount = 64

    /// The names a field cannot take: the profile's own members and PostgreSQL's system columns.
    static let reservedNames: Set<String> = [
        "id", "username", "display_name", "version", "created_at", "updated_at",
        "tableoid", "xmin", "xmax", "cmin", "cmax", "ctid",
    ]

    /// The fields the migrations declare out of the box.
    public static let standard = try! ProfileFieldCatalog([  // valid by construction; a test holds it
        ProfileFieldDeclaration(name: "bio", kind: .paragraph, maximumLength: 500),
        ProfileFieldDeclaration(name: "avatar_url", kind: .httpsURL, maximumLength: 2_048),
        ProfileFieldDeclaration(name: "location", kind: .text, maximumLength: 100),
        ProfileFieldDeclaration(name: "website", kind: .httpsURL, maximumLength: 2_048),
    ])

    /// No fields beyond the name: a database the fields' migration has not reached.
    public static let none = try! ProfileFieldCatalog([])

    public init(_ declarations: [ProfileFieldDeclaration]) throws(ProfileFieldCatalogError) {
        var names = Set<String>()
        for declaration in declarations {
            guard Self.isValidName(declaration.name) else { throw .invalidName(declaration.name) }
            guard !Self.reservedNames.contains(declaration.name) else { throw .reservedName(declaration.name) }
            guard names.insert(declaration.name).inserted else { throw .duplicateName(declaration.name) }
            guard (1...Self.maximumTotalLength).contains(declaration.maximumLength) else {
                throw .invalidLength(declaration.name, declaration.maximumLength)
            }
        }
        guard declarations.count <= Self.maximumFieldCount else { throw .tooMany(declarations.count) }
        let total = declarations.reduce(0) { $0 + $1.maximumLength }
        guard total <= Self.maximumTotalLength else { throw .tooLong(total) }
        self.declarations = declarations
        self.shape = ProfileFields.shape(ofNames: declarations.map(\.shapeName))
        self.hasOwnerOnlyFields = declarations.contains { $0.readBy == .owner }
        self.hasAdminWrittenFields = declarations.contains { $0.writtenBy == .admin }
        self.maximumWriteBodyBytes = Self.writeBodyBytes(declarations)
    }

    /// The largest body a write (`PUT`, `PATCH`) may have under these declarations: room for the
    /// longest valid profile in the longest JSON a client may write for it (docs/design.md §11.2).
    public let maximumWriteBodyBytes: Int

    /// The largest ``maximumWriteBodyBytes`` of any catalog: the HTTP layer's bound, which holds
    /// before the declarations are read and whatever they are.
    public static let largestWriteBodyBytes = writeBodyBytes(
        (0..<maximumFieldCount).map { index in
            ProfileFieldDeclaration(
                name: String(repeating: "f", count: 63), kind: .text,
                maximumLength: index == 0 ? maximumTotalLength - (maximumFieldCount - 1) : 1)
        })

    /// Every member at its longest, every character written as a JSON escape — 6 bytes
    /// (`\u0062`) for a character of the Basic Multilingual Plane, 12 (`\ud83d\ude00`, one
    /// code point) for any other — with `id` and `updated_at` sent back as a `GET` gave them,
    /// and room for white space between the tokens.
    private static func writeBodyBytes(_ declarations: [ProfileFieldDeclaration]) -> Int {
        let escaped = 6, codePoint = 12
        // `"name":` and `,` around a value, every character of the name escaped.
        func member(_ name: Int, value: Int) -> Int { 2 + name * escaped + 2 + value }
        func string(codePoints: Int) -> Int { 2 + codePoints * codePoint }
        var bytes = 2  // { }
        bytes += member("display_name".utf8.count, value: string(codePoints: ProfileValidation.displayNameLength.upperBound))
        bytes += member("username".utf8.count, value: 2 + ProfileValidation.usernameLength.upperBound * escaped)
        bytes += member("version".utf8.count, value: 24)  // an integer, or one written with a fraction or an exponent
        bytes += member("id".utf8.count, value: 20)
        bytes += member("updated_at".utf8.count, value: 2 + 32 * escaped)
        for declaration in declarations {
            bytes += member(declaration.name.utf8.count, value: string(codePoints: declaration.maximumLength))
        }
        let whiteSpace = 4 * 1024
        return bytes + whiteSpace
    }

    public func declaration(named name: String) -> ProfileFieldDeclaration? {
        declarations.first { $0.name == name }
    }

    /// A profile's fields, every one unset.
    public var unsetFields: ProfileFields {
        ProfileFields(declarations.map { ProfileFields.Entry($0, value: nil) })
    }

    /// `^[a-z][a-z0-9_]{0,62}$`: a PostgreSQL identifier whose quoted form names the same column
    /// as its bare one (the statements quote it all the same: `user`, `order` and `end` are
    /// fields like any other), and a JSON member that needs no escaping.
    static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...63).contains(bytes.count), (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(bytes[0]) else { return false }
        return bytes.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "_")
        }
    }
}

/// One declared field: its name (the column's and the JSON member's), its kind and its bound.
public struct ProfileFieldDeclaration: Sendable, Hashable {
    public enum Kind: String, Sendable, CaseIterable {
        /// One line of text: the display name's rules (no control characters), any length up to the bound.
        case text
        /// Text that may hold line breaks (`\n`), such as a bio.
        case paragraph
        /// An absolute `https` URL with a host, in printable ASCII (clients percent-encode the rest).
        case httpsURL = "https_url"
        /// An email address: `local@domain`, a stated rule rather than RFC 5322 (docs/api.md).
        case email
        /// A calendar date, ISO 8601 `YYYY-MM-DD` (a birthday).
        case date
    }

    /// Who reads a field (`profile_fields.read_by`).
    public enum Readers: String, Sendable, CaseIterable {
        /// Anyone who may read the profile: the default, and every field before visibility existed.
        case everyone
        /// The profile's owner and holders of `profiles:admin`: never in an answer to anyone else.
        case owner
    }

    /// Who writes a field (`profile_fields.written_by`).
    public enum Writers: String, Sendable, CaseIterable {
        /// The profile's owner (and administrators): the default.
        case owner
        /// Holders of `profiles:admin` only: a mark such as `verified`, a role.
        case admin
    }

    public let name: String
    public let kind: Kind
    /// The longest value, in Unicode code points, as sent and in the NFC form that is stored.
    public let maximumLength: Int
    public let readBy: Readers
    public let writtenBy: Writers

    public init(name: String, kind: Kind, maximumLength: Int, readBy: Readers = .everyone, writtenBy: Writers = .owner) {
        self.name = name
        self.kind = kind
        self.maximumLength = maximumLength
        self.readBy = readBy
        self.writtenBy = writtenBy
    }

    /// The name as the catalog's shape counts it (``ProfileFields/shapeName(_:isOwnerOnly:)``).
    var shapeName: String { ProfileFields.shapeName(name, isOwnerOnly: readBy == .owner) }
}

public enum ProfileFieldCatalogError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidName(String)
    case reservedName(String)
    case duplicateName(String)
    case invalidLength(String, Int)
    case tooLong(Int)
    case tooMany(Int)
    case unknownKind(field: String, kind: String)
    /// A `read_by` or `written_by` this release does not know.
    case unknownVisibility(field: String, column: String, value: String)
    /// A declared field whose column `user_profiles` lacks, or has with another type than `text`.
    case missingColumn(String)

    public var description: String {
        switch self {
        case .invalidName(let name): "profile field \"\(name)\": a name is 1-63 of a-z, 0-9 and _, starting with a letter"
        case .reservedName(let name): "profile field \"\(name)\": the name belongs to the profile itself"
        case .duplicateName(let name): "profile field \"\(name)\" is declared twice"
        case .invalidLength(let name, let length):
            "profile field \"\(name)\": max_length \(length) is outside 1-\(ProfileFieldCatalog.maximumTotalLength)"
        case .tooLong(let total):
            "the declared profile fields add up to \(total) code points; together they may have at most \(ProfileFieldCatalog.maximumTotalLength)"
        case .tooMany(let count):
            "\(count) profile fields are declared; at most \(ProfileFieldCatalog.maximumFieldCount) may be"
        case .unknownVisibility(let field, let column, let value):
            "profile field \"\(field)\": \(column) \"\(value)\" is none of \(column == "read_by" ? ProfileFieldDeclaration.Readers.allCases.map(\.rawValue).joined(separator: ", ") : ProfileFieldDeclaration.Writers.allCases.map(\.rawValue).joined(separator: ", "))"
        case .unknownKind(let field, let kind):
            "profile field \"\(field)\": kind \"\(kind)\" is none of \(ProfileFieldDeclaration.Kind.allCases.map(\.rawValue).joined(separator: ", "))"
        case .missingColumn(let name):
            "profile field \"\(name)\" is declared but user_profiles has no text column of that name: add it in the same migration"
        }
    }
}
