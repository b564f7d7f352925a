import Foundation

/// A validated `PUT /users/profile/{id}` body: either an optimistic update or a creation.
enum ProfileWriteRequest: Equatable {
    case update(displayName: String, expectedVersion: Int32)
    case create(username: String, displayName: String)

    /// The largest body a profile write may have; profile documents are tiny.
    static let maximumBodyBytes = 4 * 1024

    /// The deepest nesting of objects and arrays accepted; a profile write is one flat object, and
    /// a little room is left for fields the service ignores.
    static let maximumNestingDepth = 4

    /// Parses and validates a write.
    ///
    /// - Parameters:
    ///   - body: the JSON body: `{"display_name": …, "version": N}` to update, or
    ///     `{"username": …, "display_name": …}` with `version` 0 or `ifNoneMatchAny` to create.
    ///   - ifMatchVersion: the version from an `If-Match: "N"` header, if any.
    ///   - ifNoneMatchAny: whether the request carried `If-None-Match: *` (create only).
    static func parse(body: [UInt8], ifMatchVersion: Int32?, ifNoneMatchAny: Bool) throws(ProfileRequestError)
        -> ProfileWriteRequest
    {
        let fields = try decodeFields(body)
        let bodyVersion: Int32?
        switch fields.version {
        case nil: bodyVersion = nil
        case let value? where value == 0: bodyVersion = 0
        case let value? where (1...Int64(Int32.max)).contains(value): bodyVersion = Int32(value)
        default: throw .invalidField("version", "must be an integer from 1 to 2147483647 (0 to create)")
        }
        guard let rawDisplayName = fields.displayName else { throw .missingField("display_name") }
        let displayName = try ProfileValidation.validDisplayName(rawDisplayName)

        if ifNoneMatchAny || bodyVersion == 0 {
            if ifMatchVersion != nil {
                throw .malformed(field: nil, "If-Match and a create (If-None-Match: * or version 0) exclude each other")
            }
            guard let rawUsername = fields.username else { throw .missingField("username") }
            return .create(username: try ProfileValidation.validUsername(rawUsername), displayName: displayName)
        }
        if fields.username != nil {
            throw .invalidField("username", "cannot be changed; send only display_name and version")
        }
        switch (bodyVersion, ifMatchVersion) {
        case (let body?, let header?) where body != header:
            throw .invalidField("version", "disagrees with If-Match")
        case (let version?, _), (nil, let version?):
            return .update(displayName: displayName, expectedVersion: version)
        case (nil, nil):
            throw .missingField("version")
        }
    }

    private struct Fields: Decodable {
        var displayName: String?
        var username: String?
        var version: Int64?

        enum CodingKeys: String, CodingKey {
            case displayName = "display_name", username, version
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            displayName = try container.decodeIfPresent(String.self, forKey: .displayName)
            username = try container.decodeIfPresent(String.self, forKey: .username)
            // Decoded as a number first so that 1.5 is reported against "version", not as bad JSON.
            if let number = try container.decodeIfPresent(Double.self, forKey: .version) {
                guard number.rounded() == number, abs(number) < 1e15 else {
                    throw DecodingError.typeMismatch(
                        Int64.self,
                        .init(codingPath: [CodingKeys.version], debugDescription: "version must be an integer"))
                }
                version = Int64(number)
            }
        }
    }

    /// What one pass over the JSON outside its strings finds, before Foundation parses it.
    private struct Structure {
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
                switch byte {
                case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): continue
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

    private static func decodeFields(_ body: [UInt8]) throws(ProfileRequestError) -> Fields {
        guard !body.isEmpty else { throw .malformed(field: nil, "the request needs a JSON object body") }
        guard body.count <= maximumBodyBytes else {
            throw .malformed(field: nil, "the body is larger than \(maximumBodyBytes) bytes")
        }
        // Bounds the parser's work on hostile input such as `[[[[…]]]]`, and refuses trailing commas.
        let structure = Structure(scanning: body)
        guard !structure.hasTrailingComma else { throw .malformed(field: nil, "the body is not a valid JSON object") }
        guard structure.deepestNesting <= maximumNestingDepth else {
            throw .malformed(field: nil, "the body nests objects or arrays deeper than \(maximumNestingDepth) levels")
        }
        do {
            return try JSONDecoder().decode(Fields.self, from: Data(body))
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.dataCorrupted(context) {
            if let field = context.codingPath.last?.stringValue {
                throw .malformed(field: field, "\(field) has the wrong type or value")
            }
            throw .malformed(field: nil, "the body is not a valid JSON object")
        } catch {
            throw .malformed(field: nil, "the body is not a valid JSON object")
        }
    }
}
