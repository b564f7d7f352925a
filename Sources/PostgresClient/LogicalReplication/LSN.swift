/// A WAL position, what PostgreSQL calls an LSN and writes `X/Y` (two hexadecimal halves).
///
/// ```swift
/// let lsn = LSN("16/B374D848")!   // rawValue 0x16_B374_D848
/// "\(lsn)"                        // "16/B374D848"
/// ```
///
/// Related PostgreSQL documentation: <https://www.postgresql.org/docs/15/datatype-pg-lsn.html>
public struct LSN: RawRepresentable, Comparable, Hashable, Sendable, CustomStringConvertible {
    /// The byte position in the WAL.
    public var rawValue: UInt64

    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// Parses PostgreSQL's `X/Y` notation: one to eight hexadecimal digits on each side of the slash.
    /// Returns `nil` for anything else.
    public init?(_ text: String) {
        let halves = text.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2,
            let high = Self.parseHalf(halves[0]), let low = Self.parseHalf(halves[1])
        else { return nil }
        rawValue = UInt64(high) << 32 | UInt64(low)
    }

    /// `0/0`: "start where the slot's confirmed position is" to `START_REPLICATION`.
    public static let zero = LSN(rawValue: 0)

    /// `X/Y` in upper-case hexadecimal without leading zeros, as PostgreSQL prints it.
    public var description: String {
        let high = String(UInt32(truncatingIfNeeded: rawValue >> 32), radix: 16, uppercase: true)
        let low = String(UInt32(truncatingIfNeeded: rawValue), radix: 16, uppercase: true)
        return "\(high)/\(low)"
    }

    public static func < (lhs: LSN, rhs: LSN) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    private static func parseHalf(_ text: Substring) -> UInt32? {
        guard (1...8).contains(text.count), text.allSatisfy(\.isHexDigit) else { return nil }
        return UInt32(text, radix: 16)
    }
}
