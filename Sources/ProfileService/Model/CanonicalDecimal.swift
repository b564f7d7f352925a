/// A positive integer in canonical decimal form (no sign, no leading zeros, no spaces) that fits
/// `T`: the only spelling of an integer `openapi.yaml` admits for ids and versions.
func canonicalPositive<T: FixedWidthInteger>(_ text: Substring, as type: T.Type = T.self) -> T? {
    canonicalPositive(text.utf8, as: type)
}

/// ``canonicalPositive(_:as:)`` over bytes (a list's `ids`, parsed without `Character`s).
func canonicalPositive<T: FixedWidthInteger, Digits: Collection<UInt8>>(_ digits: Digits, as _: T.Type = T.self) -> T? {
    guard let first = digits.first, first != UInt8(ascii: "0") else { return nil }
    var value: T = 0
    for byte in digits {
        guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
        let (shifted, overflowShift) = value.multipliedReportingOverflow(by: 10)
        let (next, overflowAdd) = shifted.addingReportingOverflow(T(byte - UInt8(ascii: "0")))
        guard !overflowShift, !overflowAdd else { return nil }
        value = next
    }
    return value
}
