/// How a worker's reads look up memcached: a plain `gets`, or — while most of its reads miss — the
/// lease `add` sent together with the `gets` (docs/design.md §6).
///
/// A miss otherwise costs a round trip for the `gets` that finds nothing and another for the
/// lease (`add` and `gets` pipelined); sending the lease first saves the first. On a hit the
/// `add` is wasted (memcached refuses it, nothing changes), which costs memcached a little work
/// and the worker a `send`, so it is done only while misses are common: a cache being refilled
/// after a restart or a flush, or a cold key range.
struct ReadStrategy {
    /// Recent misses as a share of recent reads, in 1/1024: a moving average over about 16 reads.
    private var missShare = 0
    private let threshold: Int

    init(leaseFirstMissShare: Double) {
        threshold = Int(min(max(leaseFirstMissShare, 0), 2) * 1024)  // 0: always; above 1: never
    }

    /// Whether the next read should send its lease with its first lookup.
    var leaseFirst: Bool { missShare >= threshold }

    mutating func record(miss: Bool) {
        missShare += ((miss ? 1024 : 0) - missShare) / 16
    }
}
