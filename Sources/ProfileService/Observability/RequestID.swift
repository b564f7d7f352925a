/// The `X-Request-ID` of a request: the gateway's, when it is well formed, else a new one.
enum RequestID {
    /// Longest id accepted from a client; longer ones are replaced, not truncated.
    static let maximumLength = 128

    static func accepting(_ candidate: String?) -> String {
        if let candidate, isWellFormed(candidate) { return candidate }
        return generate()
    }

    /// 1–128 of `A-Z a-z 0-9 - _ . :`, so it is safe in logs and headers as it is.
    static func isWellFormed(_ text: String) -> Bool {
        (1...maximumLength).contains(text.utf8.count)
            && text.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                    UInt8(ascii: ":"):
                    true
                default:
                    false
                }
            }
    }

    /// 16 random hex digits.
    static func generate() -> String {
        let hex = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
