import Foundation
import Testing

@testable import ProfileClient

struct RetryPolicyTests {
    let policy = RetryPolicy(
        maximumAttempts: 5, initialDelay: .milliseconds(100), maximumDelay: .milliseconds(500),
        maximumRetryAfter: .seconds(3))

    @Test func backoffDoublesWithinJitterBoundsAndStopsAtTheCap() {
        let ceilings: [Duration] = [.milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(500)]
        for (index, ceiling) in ceilings.enumerated() {
            #expect(policy.delay(afterAttempt: index + 1, retryAfter: nil, randomUnit: 0) == ceiling / 2)
            #expect(policy.delay(afterAttempt: index + 1, retryAfter: nil, randomUnit: 1) == ceiling)
            let middle = policy.delay(afterAttempt: index + 1, retryAfter: nil, randomUnit: 0.5)!
            #expect(middle > ceiling / 2 && middle < ceiling)
        }
    }

    @Test func noDelayAfterTheLastAttempt() {
        #expect(policy.delay(afterAttempt: 5, retryAfter: nil, randomUnit: 0.5) == nil)
        #expect(RetryPolicy(maximumAttempts: 1).delay(afterAttempt: 1, retryAfter: nil, randomUnit: 0) == nil)
    }

    @Test func retryAfterIsHonouredUnlessTooLong() {
        #expect(policy.delay(afterAttempt: 1, retryAfter: .seconds(2), randomUnit: 1) == .seconds(2))
        #expect(policy.delay(afterAttempt: 4, retryAfter: .milliseconds(10), randomUnit: 1) == .milliseconds(500))
        #expect(policy.delay(afterAttempt: 1, retryAfter: .seconds(4), randomUnit: 0) == nil)
    }

    @Test func retryAfterParsesSecondsAndHTTPDates() {
        #expect(RetryPolicy.parseRetryAfter("1") == .seconds(1))
        #expect(RetryPolicy.parseRetryAfter(" 120 ") == .seconds(120))
        #expect(RetryPolicy.parseRetryAfter("-1") == nil)
        #expect(RetryPolicy.parseRetryAfter("soon") == nil)
        let now = Date(timeIntervalSince1970: 1_445_412_475)  // Wed, 21 Oct 2015 07:27:55 GMT
        #expect(RetryPolicy.parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", now: now) == .seconds(5))
        #expect(RetryPolicy.parseRetryAfter("Wed, 21 Oct 2015 07:27:00 GMT", now: now) == .zero)
    }
}
