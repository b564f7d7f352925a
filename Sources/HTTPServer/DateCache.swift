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
        let now = System.unixTime()
        if now != second {
            second = now
            value = System.imfFixdate(now)
        }
        return value
    }
}
