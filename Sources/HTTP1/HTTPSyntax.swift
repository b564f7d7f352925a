/// Character classes of RFC 9110 §5.6 and ASCII helpers shared by the parser and the header type.
enum HTTPSyntax {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let space: UInt8 = 0x20
    static let tab: UInt8 = 0x09
    static let colon: UInt8 = 0x3A

    /// tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
    private static let tokenTable: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        for byte in UInt8(ascii: "0")...UInt8(ascii: "9") { table[Int(byte)] = true }
        for byte in UInt8(ascii: "a")...UInt8(ascii: "z") { table[Int(byte)] = true }
        for byte in UInt8(ascii: "A")...UInt8(ascii: "Z") { table[Int(byte)] = true }
        for byte in "!#$%&'*+-.^_`|~".utf8 { table[Int(byte)] = true }
        return table
    }()

    @inline(__always)
    static func isTokenByte(_ byte: UInt8) -> Bool { tokenTable[Int(byte)] }

    /// field-vchar / SP / HTAB (obs-text allowed, RFC 9110 §5.5).
    @inline(__always)
    static func isFieldValueByte(_ byte: UInt8) -> Bool {
        byte >= 0x21 && byte != 0x7F || byte == space || byte == tab
    }

    @inline(__always)
    static func isWhitespace(_ byte: UInt8) -> Bool { byte == space || byte == tab }

    @inline(__always)
    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }

    /// ASCII case-insensitive comparison of two byte sequences.
    static func equalsIgnoringCase<A: Sequence<UInt8>, B: Sequence<UInt8>>(_ a: A, _ b: B) -> Bool {
        var left = a.makeIterator()
        var right = b.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return true
            case (let l?, let r?) where lowercased(l) == lowercased(r): continue
            default: return false
            }
        }
    }

    /// ASCII case-insensitive comparison of two strings.
    @inline(__always)
    static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && equalsIgnoringCase(a.utf8, b.utf8)
    }

    /// Trims leading and trailing SP and HTAB.
    static func trimmed(_ bytes: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        var start = 0
        var end = bytes.count
        while start < end, isWhitespace(bytes[start]) { start += 1 }
        while end > start, isWhitespace(bytes[end - 1]) { end -= 1 }
        return UnsafeBufferPointer(rebasing: bytes[start..<end])
    }
}
