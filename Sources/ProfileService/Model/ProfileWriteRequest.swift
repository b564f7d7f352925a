import Foundation

/// A validated `PUT /users/profile/{id}` body: either an optimistic update or a creation.
enum ProfileWriteRequest: Equatable {
    /// Sets the display name and each declared field the body names; the fields it leaves out
    /// keep their values, so a client that knows only `display_name` never erases the others.
    case update(ProfileChanges, expectedVersion: Int32)
    case create(username: String, displayName: String, fields: [ProfileFields.Entry])

    /// Members a client may send back as it read them (a `GET`'s body): the service sets them,
    /// so their values are ignored.
    static let readOnlyMembers: Set<String> = ["id", "updated_at"]

    /// The deepest nesting of objects and arrays accepted; a profile write is one flat object, and
    /// a little room is left for fields the service ignores.
    static let maximumNestingDepth = 4

    /// Parses and validates a write. The body says what it is: a `username` makes it a create,
    /// its absence an update. Input is checked first (400, 422), then the preconditions
    /// (412, 428), so a request refused for its preconditions is well formed in every part
    /// (docs/design.md §7: rules `openapi.yaml` can state exactly).
    ///
    /// - Parameters:
    ///   - body: the JSON body: `{"display_name": …, "version": N}` to update, or
    ///     `{"username": …, "display_name": …}` (with `version` 0 or none) to create.
    ///   - ifMatchVersion: the version from an `If-Match: "N"` header, if any.
    ///   - ifNoneMatchAny: whether the request carried `If-None-Match: *`.
    ///   - catalog: the declared fields the body may set.
    ///   - id: the path's id: an `id` the body sends back must be it (a client that sends one
    ///     profile to another's path has a bug that must not write).
    static func parse(
        body: [UInt8], ifMatchVersion: Int32?, ifNoneMatchAny: Bool, catalog: ProfileFieldCatalog, id: Int64? = nil
    ) throws(ProfileRequestError) -> ProfileWriteRequest {
        let fields = try decodeFields(body, catalog: catalog)
        if let id, let sent = fields.others.first(where: { $0.name == "id" }), sent.value != .integer(id) {
            throw .invalidField("id", "must be the id of the path, \(id), or absent")
        }
        if fields.removesDisplayName { throw .malformed(field: "display_name", "display_name has the wrong type or value") }
        guard let rawDisplayName = fields.displayName else { throw .missingField("display_name") }
        let displayName = try ProfileValidation.validDisplayName(rawDisplayName)
        let declared = try declaredFields(of: fields, catalog: catalog)

        if let rawUsername = fields.username {
            guard fields.version == nil || fields.version == 0 else {
                throw .invalidField("version", "must be 0 or absent with a username (a create); a rename is a PATCH of the username")
            }
            let username = try ProfileValidation.validUsername(rawUsername)
            if ifMatchVersion != nil {
                throw .preconditionFailed(
                    field: "If-Match", "If-Match expects an existing version, but a body with a username creates the profile")
            }
            return .create(username: username, displayName: displayName, fields: declared)
        }
        let bodyVersion: Int32?
        switch fields.version {
        case nil: bodyVersion = nil
        case 0: throw .missingField("username")  // version 0 creates, which needs a username
        case let value? where (1...Int64(Int32.max)).contains(value): bodyVersion = Int32(value)
        default: throw .invalidField("version", "must be an integer from 1 to 2147483647 (0 to create)")
        }
        if ifNoneMatchAny {
            throw .preconditionFailed(
                field: "If-None-Match", "If-None-Match: * asks for a new profile, but a body without username updates one")
        }
        switch (bodyVersion, ifMatchVersion) {
        case (let body?, let header?) where body != header:
            throw .preconditionFailed(
                field: "If-Match", "If-Match \"\(header)\" and version \(body) cannot both be the current version")
        case (let version?, _), (nil, let version?):
            return .update(ProfileChanges(displayName: displayName, fields: declared), expectedVersion: version)
        case (nil, nil):
            throw .preconditionRequired("send the version you read, as \"version\" or If-Match: \"N\"")
        }
    }

    /// The declared fields a body sets, validated, in the body's order (`null`: unset). A member
    /// that is no field is refused, naming it, rather than dropped: a client that sends a field
    /// must learn that it was not stored.
    static func declaredFields(of fields: ProfileWriteFields, catalog: ProfileFieldCatalog, ignoring: Set<String> = readOnlyMembers)
        throws(ProfileRequestError) -> [ProfileFields.Entry]
    {
        var declared: [ProfileFields.Entry] = []
        for member in fields.others where !ignoring.contains(member.name) {
            guard let declaration = catalog.declaration(named: member.name) else {
                throw .invalidField(String(member.name.prefix(64)), "is not a field of a profile")
            }
            switch member.value {
            case .string(let raw): declared.append(.init(declaration, value: try ProfileValidation.validField(raw, declaration)))
            case .null: declared.append(.init(declaration, value: nil))
            case .integer, .other: throw .malformed(field: member.name, "\(member.name) must be a string, or null to unset it")
            }
        }
        return declared
    }

    /// The other members a body can hold and be valid — the declared fields and the read-only
    /// members — and one more: that one is no field, so the body is refused whatever the rest.
    static func othersWorthReading(_ catalog: ProfileFieldCatalog) -> Int {
        catalog.declarations.count + readOnlyMembers.count + 1
    }

    /// What one pass over the JSON outside its strings finds, before Foundation parses it.
    struct Structure {
        var deepestNesting = 0
        /// A `,` right before `}` or `]`: Foundation's parser accepts it, RFC 8259 does not.
        var hasTrailingComma = false

        init(scanning body: [UInt8]) {
            var inString = false, escaped = false, depth = 0, lastSignificant: UInt8 = 0
            for byte in body {
                if inString {
                    if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true }
                    else if byte == UInt8(ascii: "\"") { inString = false }
                    continue
                }
                if JSONSyntax.isWhitespace(byte) { continue }
                switch byte {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    deepestNesting = max(deepestNesting, depth)
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if lastSignificant == UInt8(ascii: ",") { hasTrailingComma = true }
                default: break
                }
                lastSignificant = byte
            }
        }
    }

    /// The members of a write's body (`PUT` or `PATCH`). Its size is the caller's to bound: the
    /// route refuses a body above `catalog`'s ``ProfileFieldCatalog/maximumWriteBodyBytes`` (413)
    /// before it parses it.
    static func decodeFields(_ body: [UInt8], catalog: ProfileFieldCatalog) throws(ProfileRequestError) -> ProfileWriteFields {
        guard !body.isEmpty else { throw .malformed(field: nil, "the request needs a JSON object body") }
        let kept = othersWorthReading(catalog)
        if let fields = ProfileWriteFields(scanningFlatObject: body, keepingOthers: kept) { return fields }
        // Bounds the parser's work on hostile input such as `[[[[…]]]]`, and refuses trailing commas.
        let structure = Structure(scanning: body)
        guard !structure.hasTrailingComma else { throw .malformed(field: nil, "the body is not a valid JSON object") }
        guard structure.deepestNesting <= maximumNestingDepth else {
            throw .malformed(field: nil, "the body nests objects or arrays deeper than \(maximumNestingDepth) levels")
        }
        do {
            let decoder = JSONDecoder()
            decoder.userInfo[ProfileWriteFields.othersKept] = kept
            return try decoder.decode(ProfileWriteFields.self, from: Data(body))
        } catch let error as ProfileRequestError {
            throw error
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.dataCorrupted(context),
            let DecodingError.valueNotFound(_, context)
        {
            if let field = context.codingPath.last?.stringValue {
                throw .malformed(field: field, "\(field) has the wrong type or value")
            }
            throw .malformed(field: nil, "the body is not a valid JSON object")
        } catch {
            throw .malformed(field: nil, "the body is not a valid JSON object")
        }
    }
}

/// Foundation's reading of a body, for what ``ProfileWriteFields/init(scanningFlatObject:)`` leaves to it.
extension ProfileWriteFields: Decodable {
    struct MemberKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// How many other members to keep (an `Int` in the decoder's `userInfo`; all when absent).
    static let othersKept = CodingUserInfoKey(rawValue: "ProfileWriteFields.othersKept")!

    /// A profile member that is present must have a value of its type: `null` is refused
    /// (decoding a non-optional throws `valueNotFound`), never read as an absent field.
    init(from decoder: any Decoder) throws {
        let othersKept = decoder.userInfo[Self.othersKept] as? Int ?? .max
        let container = try decoder.container(keyedBy: MemberKey.self)
        for key in container.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
            switch key.stringValue {
            case "display_name":
                if try container.decodeNil(forKey: key) {
                    removesDisplayName = true
                } else {
                    displayName = try container.decode(String.self, forKey: key)
                }
            case "username":
                username = try container.decode(String.self, forKey: key)
            case "version":
                // Decoded as a number first so that 1.5 is reported against "version", not as bad JSON.
                let number = try container.decode(Double.self, forKey: key)
                guard number.rounded() == number, abs(number) < 1e15 else {
                    throw DecodingError.typeMismatch(
                        Int64.self, .init(codingPath: [key], debugDescription: "version must be an integer"))
                }
                version = Int64(number)
            default:
                guard others.count < othersKept else { continue }
                let value: MemberValue
                if try container.decodeNil(forKey: key) {
                    value = .null
                } else if let text = try? container.decode(String.self, forKey: key) {
                    value = .string(text)
                } else if let number = try? container.decode(Decimal.self, forKey: key) {
                    // Read exactly: as an Int64, `1.5` would round to an integer.
                    value = Int64(number.description).map(MemberValue.integer) ?? .other
                } else {
                    value = .other
                }
                others.append(Member(name: key.stringValue, value: value))
            }
        }
    }
}
