import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient

/// Following a profile's event stream: deletions and refusals reach observers, tokens are asked
/// again after a 401, backoff grows until a stream proves healthy, and the service's asked waits
/// (`retry:`, `Retry-After`) are honoured up to a cap. Waits are recorded, not slept.
@Suite(.timeLimit(.minutes(1))) struct StreamFollowingTests {
    static let id: Int64 = 42
    typealias Events = ControlledEventTransport

    static func profile(_ name: String, _ version: Int32) -> Profile {
        FakeTransport.profile(id, name, version: version)
    }

    static func refusal(_ status: Int, headers: [String: String] = [:]) -> Events.Step {
        .refuse(FakeTransport.problem(status, kind: "refused", headers: headers))
    }

    @Test func aDeletedProfileReachesObserversAndComesBackWhenCreatedAgain() async throws {
        let sleeps = RecordedSleeps()
        let events = Events(scripts: [
            [.read([Events.profile(Self.profile("One", 1))]), .read([Events.deleted(Self.id)]), .close],  // a drain
            [.read([Events.profile(Self.profile("Again", 2))])],  // created again, above the old version
        ])
        let client = sleeps.client(events: events)
        let seen = EventRecorder(client.events(for: Self.id))
        #expect(
            await seen.wait { $0.count >= 3 },
            "\(seen.events)")
        #expect(
            seen.events == [.updated(Self.profile("One", 1)), .deleted(id: Self.id), .updated(Self.profile("Again", 2))])
        #expect(events.requests.map(\.url.path) == ["/users/profiles/events", "/users/profiles/events"], "the list stream")
        #expect(events.requests[1].streamMembers == ["42@1"], "resumed at the floor")
    }

    @Test func aRefusalForGoodIsReportedAndObservingAgainFollowsAnew() async throws {
        let sleeps = RecordedSleeps()
        let events = Events(scripts: [[Self.refusal(403)], [.read([Events.profile(Self.profile("One", 1))])]])
        let client = sleeps.client(events: events)
        let first = EventRecorder(client.events(for: Self.id))
        #expect(await first.wait { $0 == [.failed(.forbidden, willRetry: false)] }, "\(first.events)")
        let second = EventRecorder(client.events(for: Self.id))
        #expect(await second.wait { $0.contains(.updated(Self.profile("One", 1))) }, "\(second.events)")
        #expect(events.requests.count == 2)
    }

    @Test func aLostStreamIsReportedAndItsReturnToo() async throws {
        let sleeps = RecordedSleeps()
        let events = Events(scripts: [[.fail], [.read([Events.profile(Self.profile("One", 1))])]])
        let client = sleeps.client(events: events)
        let seen = EventRecorder(client.events(for: Self.id))
        #expect(
            await seen.wait {
                $0 == [.failed(.transport("connection lost"), willRetry: true), .resumed, .updated(Self.profile("One", 1))]
            }, "\(seen.events)")
    }

    @Test func a401AsksTheProviderOnceMoreForAFreshTokenThenGivesUp() async throws {
        let sleeps = RecordedSleeps()
        let minted = Mutex(0)
        let rejected = Mutex<[String]>([])
        let events = Events(scripts: [
            [Self.refusal(401)], [.read([Events.profile(Self.profile("One", 1))]), .fail], [Self.refusal(401)],
            [Self.refusal(401)],
        ])
        let client = sleeps.client(events: events) { configuration in
            configuration.tokenProvider = { "t\(minted.withLock { $0 += 1; return $0 })" }
            configuration.tokenRejected = { token in rejected.withLock { $0.append(token) } }
        }
        let seen = EventRecorder(client.events(for: Self.id))
        #expect(await seen.wait { $0.last == .failed(.unauthorized, willRetry: false) }, "\(seen.events)")
        #expect(seen.profiles == [Self.profile("One", 1)])
        // (The rows' list read asks for a token too: the stream's are told apart by what they sent.)
        let sent = events.requests.compactMap { $0.headers["Authorization"]?.replacingOccurrences(of: "Bearer ", with: "") }
        #expect(sent.count == 4 && Set(sent).count == 4, "a token of its own for each attempt: \(sent)")
        #expect(rejected.withLock { $0 } == [sent[0], sent[2]], "one fresh token per 401, then the second 401 is final")

        // Reads and writes alike: a 401 is retried once with a fresh token.
        let readerTokens = Mutex(0)
        let transport = FakeTransport { request, _ throws(TransportError) in
            request.headers["Authorization"] == "Bearer r2" ? FakeTransport.json(Self.profile("One", 1)) : FakeTransport.problem(401, kind: "unauthorized")
        }
        let reader = sleeps.client(transport, events: Events()) { configuration in
            configuration.tokenProvider = { "r\(readerTokens.withLock { $0 += 1; return $0 })" }
        }
        #expect(try await reader.fetch(id: Self.id) == Self.profile("One", 1))
    }

    @Test func aProviderThatThrowsEndsTheAttemptWithItsError() async throws {
        struct Offline: Error {}
        let sleeps = RecordedSleeps()
        let events = Events()
        let transport = FakeTransport { _, _ throws(TransportError) in FakeTransport.json(Self.profile("One", 1)) }
        let client = sleeps.client(transport, events: events) { configuration in
            configuration.tokenProvider = { throw Offline() }
        }
        await #expect(throws: ProfileClientError.tokenUnavailable(String(describing: Offline()))) {
            try await client.fetch(id: Self.id)
        }
        let seen = EventRecorder(client.events(for: Self.id))
        #expect(await seen.wait { $0.first == .failed(.tokenUnavailable(String(describing: Offline())), willRetry: true) })
        #expect(transport.requests.isEmpty && events.requests.isEmpty, "nothing goes out without its token")
    }

    @Test func backoffGrowsUntilAStreamProvesHealthy() async throws {
        let sleeps = RecordedSleeps()
        // Answered and closed at once (a proxy's 200 text/html), five times; then a stream that
        // delivers an event and fails; then one that fails at once.
        let events = Events(scripts: [
            [.close], [.close], [.close], [.close], [.close], [.read([Events.profile(Self.profile("One", 1))]), .fail], [.fail],
        ])
        let client = sleeps.client(events: events)
        let seen = EventRecorder(client.events(for: Self.id))
        #expect(await sleeps.waitForWaits(7))
        let milliseconds = sleeps.waits.prefix(7).map { $0 / .milliseconds(1) }
        #expect(milliseconds == [250, 500, 1_000, 2_000, 4_000, 250, 500], "\(milliseconds)")
        _ = seen
    }

    @Test func aStreamThatLivedItsHealthyTimeStartsOverAtTheInitialDelay() async throws {
        let sleeps = RecordedSleeps()
        let events = Events(scripts: [[.close], [.close], [.close]])
        let client = sleeps.client(events: events) { $0.liveUpdates.healthyAfter = .milliseconds(100) }
        let seen = EventRecorder(client.events(for: Self.id))
        #expect(await events.waitForConnections(4))
        try await Task.sleep(for: .milliseconds(150))  // open, quiet, past healthyAfter
        events.send(.fail)
        #expect(await sleeps.waitForWaits(4))
        #expect(sleeps.waits.prefix(4).map { $0 / .milliseconds(1) } == [250, 500, 1_000, 250])
        _ = seen
    }

    @Test func theServicesRetryHintAndRetryAfterAreHonouredUpToTheCap() async throws {
        let sleeps = RecordedSleeps()
        let events = Events(scripts: [
            [.read([Events.profile(Self.profile("One", 1))]), .closeWithRetryHint(.seconds(5))],
            [Self.refusal(503, headers: ["retry-after": "120"])],
            [Self.refusal(429, headers: ["retry-after": "900"])],
        ])
        let client = sleeps.client(events: events) { $0.liveUpdates.maximumServerDelay = .seconds(600) }
        let seen = EventRecorder(client.events(for: Self.id))
        #expect(await sleeps.waitForWaits(3))
        #expect(sleeps.waits.prefix(3) == [.seconds(5), .seconds(120), .seconds(600)])
        _ = seen
    }
}

/// ``ProfileClient/pauseLiveUpdates()`` and ``ProfileClient/resumeLiveUpdates()``: an app in the
/// background holds no stream open, and misses nothing when it comes back.
@Suite(.timeLimit(.minutes(1))) struct PausedLiveUpdatesTests {
    typealias Events = ControlledEventTransport

    @Test func pausingClosesEveryStreamAndResumingReopensThemFromTheirFloors() async throws {
        let sleeps = RecordedSleeps()
        let events = Events(scripts: [[.read([Events.profile(FakeTransport.profile(1, "One", version: 3))])]])
        let client = sleeps.client(events: events)
        let seen = EventRecorder(client.events(for: 1))
        #expect(await seen.wait { $0.count == 1 })
        let list = client.observeList(ids: [1, 2])
        #expect(await events.waitForConnections(2))

        client.pauseLiveUpdates()
        let another = EventRecorder(client.events(for: 3))  // observed while paused: no stream yet
        try await Task.sleep(for: .milliseconds(50))
        #expect(events.requests.count == 2, "no stream while paused")

        client.resumeLiveUpdates()
        #expect(await events.waitForConnections(5))
        let resumed = events.requests.dropFirst(2)
        #expect(resumed.contains { $0.url.query == "ids=1@3" }, "the observed id, at its floor")
        #expect(resumed.contains { $0.url.query == "ids=1@3,2" }, "the list")
        #expect(resumed.contains { $0.url.query == "ids=3" }, "the id observed while paused")
        _ = (list, another)
    }
}
