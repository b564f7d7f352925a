import Synchronization

/// The `Date` field value, reformatted at most once a second and shared by all threads.
final class DateCache: Sendable {
    private let cached = Mutex<(second: Int, value: [UInt8])>((-1, []))

    /// The IMF-fixdate for the current second.
    func current() -> [UInt8] {
        let now = System.unixTime()
        return cached.withLock { cache in
            if cache.second != now { cache = (now, System.imfFixdate(now)) }
            return cache.value
        }
    }
}
