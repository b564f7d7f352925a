import Synchronization

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

    /// A random prefix per process, so ids from different instances do not collide.
    private static let processPrefix = UInt64(UInt32.random(in: 0...UInt32.max)) << 32
    private static let sequence = Atomic<UInt64>(0)

    /// 16 hex digits: the process prefix and a sequence number. Drawing from the system's random
    /// source per request cost a `getrandom` system call each time (3.7 % of CPU in a profile).
    static func generate() -> String {
        let value = processPrefix | (sequence.add(1, ordering: .relaxed).newValue & 0xFFFF_FFFF)
        let digits = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: 16) { buffer in
            for index in 0..<16 {
                buffer[index] = digits[Int((value >> UInt64(60 - 4 * index)) & 0xF)]
            }
            return 16
        }
    }
}
