/// Reads the big-endian integers and NUL-terminated strings of PostgreSQL's wire formats from a
/// byte array, never past its end.
///
/// Every read checks the length first and throws ``PgOutputDecodingError`` with reason
/// ``PgOutputDecodingError/Reason/truncated`` instead of trapping, so no payload can crash the
/// process.
struct WireReader {
    let bytes: [UInt8]
    /// The next byte to read.
    private(set) var offset = 0
    /// The pgoutput message's first byte, for errors.
    private let messageKind: UInt8?

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.messageKind = bytes.first
    }

    var isAtEnd: Bool { offset >= bytes.count }

    mutating func uint8() throws -> UInt8 {
        try require(1)
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint16() throws -> UInt16 {
        UInt16(truncatingIfNeeded: try bigEndian(byteCount: 2))
    }

    mutating func uint32() throws -> UInt32 {
        UInt32(truncatingIfNeeded: try bigEndian(byteCount: 4))
    }

    mutating func int32() throws -> Int32 {
        Int32(bitPattern: try uint32())
    }

    mutating func uint64() throws -> UInt64 {
        try bigEndian(byteCount: 8)
    }

    mutating func int64() throws -> Int64 {
        Int64(bitPattern: try uint64())
    }

    mutating func lsn() throws -> LSN {
        LSN(rawValue: try uint64())
    }

    /// A NUL-terminated string (pgoutput's names), decoded as UTF-8.
    mutating func cString() throws -> String {
        guard let end = bytes[offset...].firstIndex(of: 0) else {
            offset = bytes.count
            throw error(.truncated)
        }
        defer { offset = end + 1 }
        return String(decoding: bytes[offset..<end], as: UTF8.self)
    }

    /// `count` bytes as UTF-8 text.
    mutating func text(count: Int) throws -> String {
        try require(count)
        defer { offset += count }
        return String(decoding: bytes[offset..<offset + count], as: UTF8.self)
    }

    /// The rest of the bytes.
    mutating func remainingBytes() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[min(offset, bytes.count)...])
    }

    /// An error at the current offset.
    func error(_ reason: PgOutputDecodingError.Reason, at position: Int? = nil) -> PgOutputDecodingError {
        PgOutputDecodingError(reason: reason, messageKind: messageKind, offset: position ?? offset)
    }

    private mutating func bigEndian(byteCount: Int) throws -> UInt64 {
        try require(byteCount)
        var value: UInt64 = 0
        for byte in bytes[offset..<offset + byteCount] { value = value << 8 | UInt64(byte) }
        offset += byteCount
        return value
    }

    private func require(_ count: Int) throws {
        guard count >= 0, bytes.count - offset >= count else { throw error(.truncated) }
    }
}
