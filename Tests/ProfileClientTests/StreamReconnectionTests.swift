import Testing

@testable import ProfileClient

/// ``StreamReconnection`` as a value: waits and reports for each way an attempt ends.
@Suite struct StreamReconnectionTests {
    static let lost = ProfileClientError.transport("lost")

    static func milliseconds(_ duration: Duration) -> Double {
        duration / .milliseconds(1)
    }

    @Test func failuresDoubleTheWaitUntilAStreamProvesHealthy() {
        var reconnection = StreamReconnection(policy: LiveUpdatePolicy())
        var waits: [Double] = []
        for _ in 1...9 {
            waits.append(Self.milliseconds(reconnection.attemptFailed(reporting: Self.lost, healthy: false, randomUnit: 1).wait))
        }
        #expect(waits == [250, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000])
        let afterHealthy = reconnection.attemptFailed(reporting: Self.lost, healthy: true, randomUnit: 1).wait
        #expect(Self.milliseconds(afterHealthy) == 250, "a stream that proved healthy starts the count over")
    }

    @Test func aHealthyStreamTheServiceClosedWaitsItsRetryHintAtMostTheCap() {
        var reconnection = StreamReconnection(policy: LiveUpdatePolicy(maximumServerDelay: .seconds(60)))
        #expect(reconnection.healthyStreamClosed(retryHint: nil) == .zero)
        #expect(reconnection.healthyStreamClosed(retryHint: .seconds(2)) == .seconds(2))
        #expect(reconnection.healthyStreamClosed(retryHint: nil) == .seconds(2), "the last hint holds")
        #expect(reconnection.healthyStreamClosed(retryHint: .seconds(600)) == .seconds(60))
        #expect(reconnection.attemptFailed(reporting: nil, healthy: false, serverDelay: .seconds(90), randomUnit: 0).wait == .seconds(60))
    }

    @Test func aReportedFailureIsFollowedByResumedOnceAndAnExpectedOneIsNot() {
        var reconnection = StreamReconnection(policy: LiveUpdatePolicy())
        #expect(reconnection.streamOpened() == nil)
        #expect(reconnection.attemptFailed(reporting: nil, healthy: false, randomUnit: 0).report == nil)
        #expect(reconnection.streamOpened() == nil, "an expected refusal (404) is no failure")
        #expect(reconnection.attemptFailed(reporting: Self.lost, healthy: false, randomUnit: 0).report == .failed(Self.lost, willRetry: true))
        #expect(reconnection.streamOpened() == .resumed)
        #expect(reconnection.streamOpened() == nil)
    }
}
