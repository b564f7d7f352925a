import Glibc

/// Wall-clock time for log timestamps and HTTP `Date` fields (durations and deadlines use
/// `ContinuousClock`, which a clock step cannot move).
public enum WallClock {
    /// UTC calendar fields of a second since the epoch.
    public struct UTC: Equatable, Sendable {
        public var year: Int
        /// 1…12.
        public var month: Int
        public var day: Int
        public var hour: Int
        public var minute: Int
        public var second: Int
        /// 0 = Sunday … 6 = Saturday.
        public var weekday: Int
    }

    /// Seconds since the Unix epoch (`time(2)`, a vDSO call).
    public static func unixSeconds() -> Int { Int(Glibc.time(nil)) }

    /// Seconds since the Unix epoch and the nanoseconds within that second.
    public static func now() -> (seconds: Int, nanoseconds: Int) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return (Int(now.tv_sec), Int(now.tv_nsec))
    }

    /// The UTC calendar fields of `seconds` since the epoch.
    public static func utc(_ seconds: Int) -> UTC {
        var time = time_t(seconds)
        var parts = tm()
        _ = gmtime_r(&time, &parts)
        return UTC(
            year: Int(parts.tm_year) + 1900, month: Int(parts.tm_mon) + 1, day: Int(parts.tm_mday),
            hour: Int(parts.tm_hour), minute: Int(parts.tm_min), second: Int(parts.tm_sec), weekday: Int(parts.tm_wday))
    }
}
