/// The payload of a change notification (channel `profile_changes`, or a cache cluster's own): comma-separated `<id>:<version>` pairs in
/// commit order, decimal ASCII; version 0 means the profile was deleted.
///
/// ```swift
/// ProfileChangePayload.parse("42:7,43:0")  // [(42, 7), (43, 0)]
/// ```
public enum ProfileChangePayload {
    /// The pairs of `payload`, in order; malformed pairs are skipped (a notification is a hint,
    /// never trusted to be well formed).
    public static func parse(_ payload: String) -> [(id: Int64, version: Int32)] {
        payload.utf8.split(separator: UInt8(ascii: ",")).compactMap { pair in
            let parts = pair.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
            guard parts.count == 2, let id = decimal(parts[0]).flatMap(Int64.init(exactly:)), id > 0,
                let version = decimal(parts[1]).flatMap(Int32.init(exactly:)), version >= 0
            else { return nil }
            return (id, version)
        }
    }

    /// The payload after a gap in the commit stream (docs/design.md §3.7): changes were missed,
    /// so every listener reads every profile it streams again. An instance that predates it
    /// skips it as malformed.
    public static let resynchronizeAll = "*"

    /// NOTIFY payloads stay below PostgreSQL's 8000-byte limit.
    public static let maxBytes = 7_900

    /// The payload of `changes`, for tests and for publishers in this process.
    public static func format(_ changes: [(id: Int64, version: Int32)]) -> String {
        changes.map { "\($0.id):\($0.version)" }.joined(separator: ",")
    }

    /// `changes` in order, as few payloads as fit under ``maxBytes`` each (the change feed's
    /// announcement, docs/design.md §3.2). A deleted profile is version 0.
    static func payloads(_ changes: [ProfileChange]) -> [String] {
        var payloads: [String] = []
        var payload = ""
        for change in changes {
            let item: String
            switch change {
            case .changed(let id, let version, _): item = format([(id, version)])
            case .deleted(let id): item = format([(id, 0)])
            }
            if !payload.isEmpty && payload.utf8.count + 1 + item.utf8.count > maxBytes {
                payloads.append(payload)
                payload = ""
            }
            payload += payload.isEmpty ? item : "," + item
        }
        if !payload.isEmpty { payloads.append(payload) }
        return payloads
    }

    private static func decimal(_ digits: Substring.UTF8View) -> Int64? {
        guard !digits.isEmpty, digits.count <= 19 else { return nil }
        var value: Int64 = 0
        for digit in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) else { return nil }
            let (product, overflow) = value.multipliedReportingOverflow(by: 10)
            guard !overflow else { return nil }
            let (sum, overflow2) = product.addingReportingOverflow(Int64(digit - UInt8(ascii: "0")))
            guard !overflow2 else { return nil }
            value = sum
        }
        return value
    }
}
