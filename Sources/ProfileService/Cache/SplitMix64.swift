/// A small, fast pseudo-random generator (SplitMix64) for lease tokens and TTL jitter.
///
/// These need uniqueness and spread, not secrecy. Swift's `SystemRandomNumberGenerator` makes a
/// `getrandom` system call per value, two per cache miss here; this one is seeded once from it
/// and lives on one worker thread.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64 = UInt64.random(in: 0...UInt64.max)) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
