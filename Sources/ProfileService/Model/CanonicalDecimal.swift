/// A positive integer in canonical decimal form (no sign, no leading zeros, no spaces) that fits
/// `T`: the only spelling of an integer `openapi.yaml` admits for ids and versions.
func canonicalPositive<T: FixedWidthInteger>(_ text: Substring, as type: T.Type = T.self) -> T? {
    guard let first = text.utf8.first, first != UInt8(ascii: "0"),
        text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
    else { return nil }
    return T(text)
}
