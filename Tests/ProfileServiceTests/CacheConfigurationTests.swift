import Testing

@testable import ProfileService

@Suite struct CacheConfigurationTests {
    @Test func ttlJitterStaysWithinTenPercentAndSpreads() {
        var random = SplitMix64(seed: 42)
        let configuration = ProfileCacheConfiguration()
        let ttls = (0..<1000).map { _ in configuration.jitteredTTLSeconds(using: &random) }
        #expect(ttls.allSatisfy { (270...330).contains($0) })
        #expect(Set(ttls).count > 30, "entries written together must not expire together")
    }

    @Test func generatorIsDeterministicPerSeedAndDistinctAcrossSeeds() {
        var a = SplitMix64(seed: 7), b = SplitMix64(seed: 7), c = SplitMix64(seed: 8)
        let first = (0..<100).map { _ in a.next() }
        #expect(first == (0..<100).map { _ in b.next() })
        #expect(first != (0..<100).map { _ in c.next() })
        #expect(Set(first).count == 100)
    }
}
