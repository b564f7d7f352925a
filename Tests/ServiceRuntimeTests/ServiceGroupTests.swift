import ServiceRuntime
import Synchronization
import Testing

/// `serve`'s lifecycle rule: background services start in order, stop in reverse order under one
/// shared deadline, and a failed start stops what had started.
@Suite struct ServiceGroupTests {
    final class Journal: Sendable {
        let entries = Mutex<[String]>([])
        func add(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
    }

    struct StartFailed: Error {}

    final class Part: BackgroundService {
        let serviceName: String
        let journal: Journal
        let failsToStart: Bool
        /// How long its threads take to finish once asked.
        let stopsAfter: Duration

        init(_ name: String, _ journal: Journal, failsToStart: Bool = false, stopsAfter: Duration = .zero) {
            serviceName = name
            self.journal = journal
            self.failsToStart = failsToStart
            self.stopsAfter = stopsAfter
        }

        func start() throws {
            if failsToStart { throw StartFailed() }
            journal.add("start \(serviceName)")
        }

        func stop(deadline: ContinuousClock.Instant) -> Bool {
            journal.add("stop \(serviceName)")
            guard stopsAfter > .zero else { return true }  // finished when asked
            let finished = ContinuousClock.now + stopsAfter
            sleepThread(for: min(finished, deadline) - ContinuousClock.now)
            return finished <= deadline
        }
    }

    @Test func startsInOrderAndStopsInReverse() throws {
        let journal = Journal()
        let group = ServiceGroup([Part("feed", journal), Part("fetchers", journal), Part("listener", journal)])
        try group.start()
        #expect(group.stop(within: .seconds(1)).isEmpty)
        #expect(journal.all == [
            "start feed", "start fetchers", "start listener", "stop listener", "stop fetchers", "stop feed",
        ])
    }

    @Test func aFailedStartStopsWhatHadStarted() {
        let journal = Journal()
        let group = ServiceGroup([Part("feed", journal), Part("fetchers", journal, failsToStart: true), Part("listener", journal)])
        #expect(throws: StartFailed.self) { try group.start() }
        #expect(journal.all == ["start feed", "stop feed"])
    }

    @Test func oneDeadlineForAllNamesThoseThatWereLate() {
        let journal = Journal()
        let group = ServiceGroup([
            Part("quick", journal), Part("slow", journal, stopsAfter: .milliseconds(400)),
            Part("slower", journal, stopsAfter: .seconds(5)),
        ])
        let started = ContinuousClock.now
        let late = group.stop(within: .milliseconds(300))
        #expect(late == ["slower", "slow"], "the shared deadline ran out during the slower one")
        #expect(ContinuousClock.now - started < .seconds(1), "no part waited past the group's deadline")
    }
}
