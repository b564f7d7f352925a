import Foundation
@testable import ServiceRuntime
import Testing

@Suite struct UsableProcessorsTests {
    @Test func aQuotaIsRoundedUpToWholeCPUs() {
        #expect(UsableProcessors.cpus(quota: 200_000, period: 100_000) == 2)
        #expect(UsableProcessors.cpus(quota: 150_000, period: 100_000) == 2)
        #expect(UsableProcessors.cpus(quota: 50_000, period: 100_000) == 1)
        // cgroup v1 writes -1 for "no quota".
        #expect(UsableProcessors.cpus(quota: -1, period: 100_000) == nil)
    }

    @Test func theCountIsWithinTheCPUsThisProcessMayRunOn() {
        #expect(UsableProcessors.count >= 1)
        #expect(UsableProcessors.count <= ProcessInfo.processInfo.activeProcessorCount)
    }
}
