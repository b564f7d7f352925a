import Dispatch

extension Duration {
    /// The whole duration in nanoseconds (sub-nanosecond parts dropped).
    var totalNanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}

extension DispatchTime {
    /// `duration` from now, for semaphore waits and deadlines.
    static func after(_ duration: Duration) -> DispatchTime {
        .now() + .nanoseconds(Int(duration.totalNanoseconds))
    }
}
