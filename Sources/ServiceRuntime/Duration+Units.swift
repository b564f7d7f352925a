public import Dispatch
import Foundation
import Glibc

// The runtime plumbing every module of the service shares: `Duration` in the units system calls
// and C libraries take, and sleeps of the fixed threads the service runs on (never the Swift
// concurrency pool's).

extension Duration {
    /// The whole duration in nanoseconds (sub-nanosecond parts dropped).
    public var totalNanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }

    /// Whole milliseconds, rounded down (poll timeouts, libpq and libmemcached settings, logs).
    public var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}

extension DispatchTime {
    /// `duration` from now, for semaphore waits and deadlines.
    public static func after(_ duration: Duration) -> DispatchTime {
        .now() + .nanoseconds(Int(duration.totalNanoseconds))
    }
}

/// Blocks the calling thread — a worker's or the change feed's own, never a pool's — for `duration`.
public func sleepThread(for duration: Duration) {
    let nanoseconds = max(duration.totalNanoseconds, 0)
    var request = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
    nanosleep(&request, nil)
}

/// Blocks the calling thread for `duration` in 50 ms steps, returning early once `stopping` says
/// so: a long backoff must not hold up a shutdown.
public func sleepThread(for duration: Duration, unless stopping: () -> Bool) {
    let deadline = ContinuousClock.now + duration
    while !stopping(), ContinuousClock.now < deadline {
        Thread.sleep(forTimeInterval: 0.05)
    }
}
