import ServiceRuntime

/// The `Date` field value, reformatted at most once a second.
///
/// Each thread (the loop, every worker) owns one: a shared cache behind a mutex was the hottest lock
/// of the server (45% of CPU in lock contention with 16 workers on 2 cores), and `time(2)` is a vDSO
/// call, so a per-thread copy costs one clock read per response and one format per second.
struct DateCache {
    private var second = -1
    private var value: [UInt8] = []

    /// The IMF-fixdate for the current second.
    mutating func current() -> [UInt8] {
        let now = WallClock.unixSeconds()
        if now != second {
            second = now
            value = Self.imfFixdate(now)
        }
        return value
    }

    /// `Date` field value for `seconds` (RFC 9110 §5.6.7 IMF-fixdate), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func imfFixdate(_ seconds: Int) -> [UInt8] {
        let utc = WallClock.utc(seconds)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let text =
            "\(days[utc.weekday]), \(two(utc.day)) \(months[utc.month - 1]) \(utc.year) "
            + "\(two(utc.hour)):\(two(utc.minute)):\(two(utc.second)) GMT"
        return Array(text.utf8)
    }
}
