/// The rules of the `email` and `date` kinds (docs/api.md, "Declared fields"): stated rules that a
/// client can check with the patterns `openapi.yaml` gives, not full RFC 5322 or ISO 8601 parsers.
extension ProfileValidation {
    /// An email address as mail is sent to it: `local@domain`, ASCII only.
    /// - local part: 1–64 of the RFC 5322 `atext` characters (letters, digits and
    ///   ``emailLocalSymbols``), in dot-separated runs (no dot first, last or twice in a row); no
    ///   quoted local parts and no comments;
    /// - domain: at least two labels of letters, digits and `-` (1–63 each, no `-` at either end),
    ///   at most 253 characters; no address literals (`[192.0.2.1]`). An international domain
    ///   is sent as its `xn--` form.
    static func isEmailAddress(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard let at = bytes.lastIndex(of: UInt8(ascii: "@")) else { return false }
        let local = bytes[..<at], domain = bytes[(at + 1)...]
        guard (1...64).contains(local.count), (1...253).contains(domain.count) else { return false }
        let runs = local.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard runs.allSatisfy({ !$0.isEmpty && $0.allSatisfy(isEmailLocalByte) }) else { return false }
        let labels = domain.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return labels.count >= 2
            && labels.allSatisfy { label in
                (1...63).contains(label.count) && label.first != UInt8(ascii: "-") && label.last != UInt8(ascii: "-")
                    && label.allSatisfy(isLabelByte)
            }
    }

    /// The `atext` symbols a local part may hold beside letters and digits (RFC 5322 §3.2.3).
    static let emailLocalSymbols = "!#$%&'*+/=?^_`{|}~-"

    /// ``isEmailAddress(_:)`` as a pattern (ECMA-262 and Python's `re` alike).
    static let emailPattern =
        #"^(?=[^@]{1,64}@)[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"#
        + #"@(?=[^@]{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$"#

    private static func isEmailLocalByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || emailLocalSymbols.utf8.contains(byte)
    }

    /// A calendar date of the Gregorian calendar, ISO 8601's extended form `YYYY-MM-DD`, years
    /// 0001–9999: `2024-02-29` is one, `2023-02-29` is not.
    static func isCalendarDate(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-") else { return false }
        func number(_ range: Range<Int>) -> Int? {
            var result = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                result = result * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return result
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), year >= 1,
            (1...12).contains(month)
        else { return false }
        let isLeapYear = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, isLeapYear ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        return (1...days).contains(day)
    }

    /// ``isCalendarDate(_:)`` as a pattern, less the days each month has (the service checks those).
    static let datePattern = #"^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])$"#
}
