import Testing

@testable import ProfileService

/// The read's decisions (docs/design.md §2.1) as a table: what a lookup found, and what the
/// reader does next. No I/O.
@Suite struct ReadStepTests {
    typealias Step = ReadStep

    static func next(
        _ lookup: Step.Lookup, minVersion: Int32? = nil, readingInProcess: Bool = false,
        waits: [Duration] = [.milliseconds(2)]
    ) -> Step.Action {
        var left = waits[...]
        return Step.next(after: lookup, minVersion: minVersion, readingInProcess: readingInProcess, waits: &left)
    }

    @Test(arguments: [
        (Step.Lookup.profile(version: 3), nil as Int32?, Step.Action.answerCached),
        (.profile(version: 3), 3, .answerCached),
        (.profile(version: 3), 4, .bypass(cachedVersion: 3)),
        (.absent, nil, .answerAbsent),
        (.absent, 1, .bypass(cachedVersion: 0)),
        (.ownLease, nil, .populateOverOwnLease),
        (.ownLease, 5, .populateOverOwnLease),
        (.undecodable, nil, .load(replacingUndecodable: true)),
        (.miss, nil, .load(replacingUndecodable: false)),
        (.miss, 7, .load(replacingUndecodable: false)),
        (.failed, nil, .readWithoutPopulating(memcachedFailed: true)),
    ])
    func eachLookupHasOneNextAction(lookup: Step.Lookup, minVersion: Int32?, action: Step.Action) {
        #expect(Self.next(lookup, minVersion: minVersion) == action)
    }

    @Test func anotherReadersLeaseIsFollowedInProcessElseWaitedOutThenReadAround() {
        #expect(Self.next(.othersLease, readingInProcess: true) == .followInFlight)
        var waits = [Duration.milliseconds(2), .milliseconds(4)][...]
        #expect(Step.next(after: .othersLease, minVersion: nil, readingInProcess: false, waits: &waits)
            == .waitAndLookAgain(.milliseconds(2)))
        #expect(Step.next(after: .othersLease, minVersion: nil, readingInProcess: false, waits: &waits)
            == .waitAndLookAgain(.milliseconds(4)))
        #expect(waits.isEmpty)
        // The waits ran out: PostgreSQL answers, and the other reader's lease is left alone.
        #expect(Step.next(after: .othersLease, minVersion: nil, readingInProcess: false, waits: &waits)
            == .readWithoutPopulating(memcachedFailed: false))
    }
}
