import HTTP1

/// A minimal, allocation-light JSON writer for the service's small fixed documents
/// (profiles, RFC 9457 problem documents, `/readyz`).
struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    private var needsComma = false

    init(capacity: Int = 160) {
        bytes.reserveCapacity(capacity)
    }

    /// A writer of members that follow others in an object written elsewhere: each member,
    /// the first too, comes after its comma.
    static func continuingMembers(capacity: Int = 64) -> JSONWriter {
        var writer = JSONWriter(capacity: capacity)
        writer.needsComma = true
        return writer
    }

    mutating func beginObject() { open("{") }
    mutating func endObject() { close("}") }
    mutating func beginArray() { open("[") }
    mutating func endArray() { close("]") }

    private mutating func open(_ bracket: Unicode.Scalar) {
        separate()
        bytes.append(UInt8(ascii: bracket))
        needsComma = false
    }

    private mutating func close(_ bracket: Unicode.Scalar) {
        bytes.append(UInt8(ascii: bracket))
        needsComma = true
    }

    mutating func key(_ name: String) {
        string(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    mutating func integer(_ value: Int64) {
        separate()
        bytes.append(contentsOf: String(value).utf8)
        needsComma = true
    }

    mutating func number(_ value: Double) {
        separate()
        bytes.append(contentsOf: String(value).utf8)
        needsComma = true
    }

    mutating func null() {
        separate()
        bytes.append(contentsOf: "null".utf8)
        needsComma = true
    }

    mutating func bool(_ value: Bool) {
        separate()
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
        needsComma = true
    }

    /// A member whose value is a string, an integer or a number (`"key":value`).
    mutating func member(_ name: String, _ value: String) {
        key(name)
        string(value)
    }

    mutating func member(_ name: String, _ value: some BinaryInteger) {
        key(name)
        integer(Int64(value))
    }

    mutating func member(_ name: String, _ value: Double) {
        key(name)
        number(value)
    }

    mutating func member(_ name: String, _ value: Bool) {
        key(name)
        bool(value)
    }

    /// Embeds an already-encoded JSON value (for example a profile inside a problem document).
    mutating func raw(_ json: [UInt8]) {
        separate()
        bytes.append(contentsOf: json)
        needsComma = true
    }

    mutating func string(_ value: String) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        HTTPResponse.appendJSONEscaped(value, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }
}
