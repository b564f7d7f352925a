public import FoundationEssentials

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// PostgreSQL's wire timestamps (the replication protocol's clocks, pgoutput's commit times) are
// microseconds since 2000-01-01 00:00:00 UTC, "POSTGRES_EPOCH_JDATE" in the server's sources.

/// Seconds from the Unix epoch (1970) to PostgreSQL's (2000-01-01 00:00:00 UTC).
let postgresEpochUnixSeconds: Int64 = 946_684_800

extension Int64 {
    /// The wall clock now, in microseconds since 2000-01-01 00:00:00 UTC (PostgreSQL's epoch);
    /// what a standby status update carries.
    public static var postgresNow: Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return (Int64(now.tv_sec) - postgresEpochUnixSeconds) * 1_000_000 + Int64(now.tv_nsec) / 1000
    }
}

/// `date` in microseconds since 2000-01-01 00:00:00 UTC (PostgreSQL's epoch), rounded down.
public func postgresEpochMicroseconds(from date: Date) -> Int64 {
    let seconds = date.timeIntervalSince1970 - Double(postgresEpochUnixSeconds)
    return Int64((seconds * 1_000_000).rounded(.down))
}

extension Date {
    /// The instant `microseconds` after 2000-01-01 00:00:00 UTC (PostgreSQL's epoch), e.g. a
    /// commit time from ``PgOutputMessage/commit(commitLSN:endLSN:commitTime:)``.
    public init(postgresEpochMicroseconds microseconds: Int64) {
        self.init(timeIntervalSince1970: Double(postgresEpochUnixSeconds) + Double(microseconds) / 1_000_000)
    }
}
