import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient

/// An ``EventStreamTransport`` that plays one script of events per connection and records the
/// requests (their `Last-Event-ID`).
final class FakeEventTransport: EventStreamTransport {
    private let scripts: Mutex<[[ServerSentEvent]]>
    private let log = Mutex<[TransportRequest]>([])

    init(_ scripts: [[ServerSentEvent]]) {
        self.scripts = Mutex(scripts)
    }

    var requests: [TransportRequest] { log.withLock { $0 } }

    func stream(_ request: TransportRequest, onEvents: @escaping @Sendable ([ServerSentEvent]) async -> Void)
        async throws(TransportError) -> EventStreamEnd
    {
        log.withLock { $0.append(request) }
        guard let script = scripts.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else {
            // No more scripts: a stream that stays open and quiet until cancelled.
            try? await Task.sleep(for: .seconds(60))
            throw TransportError(kind: .other, description: "cancelled")
        }
        for event in script { await onEvents([event]) }
        return .closed(retry: nil)  // the server closed it (a drain): the client reconnects
    }

    static func event(_ profile: Profile) -> ServerSentEvent {
        ServerSentEvent(
            event: "profile", id: String(profile.version),
            data: String(decoding: try! JSONEncoder().encode(profile), as: UTF8.self))
    }
}

@Suite struct ProfileClientLiveUpdatesTests {
    let id: Int64 = 42

    /// The first `count` profiles of `stream`, or fewer if 5 s pass.
    static func collect(_ stream: AsyncStream<Profile>, count: Int) async -> [Profile] {
        let reader = Task {
            var seen: [Profile] = []
            for await profile in stream {
                seen.append(profile)
                if seen.count == count { break }
            }
            return seen
        }
        let timer = Task {
            try? await Task.sleep(for: .seconds(5))
            reader.cancel()
        }
        defer { timer.cancel() }
        return await reader.value
    }

    @Test func eventsReachObserversInOrderAndAReconnectResumesWithLastEventID() async throws {
        let v1 = FakeTransport.profile(id, "One", version: 1)
        let v2 = FakeTransport.profile(id, "Two", version: 2)
        let v3 = FakeTransport.profile(id, "Three", version: 3)
        let events = FakeEventTransport([[FakeEventTransport.event(v1), FakeEventTransport.event(v2)], [FakeEventTransport.event(v3)]])
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://127.0.0.1:1")!)
        configuration.tokenProvider = { "token" }
        let client = ProfileClient(
            configuration: configuration, transport: FakeTransport { _, _ throws(TransportError) in FakeTransport.json(v1) },
            eventTransport: events, randomUnit: { 0 })
        let seen = await Self.collect(client.updates(for: id), count: 3)
        #expect(seen == [v1, v2, v3])
        let requests = events.requests
        #expect(requests.count >= 2)
        #expect(requests.first?.streamMembers == ["42"])
        #expect(requests.first?.headers["Authorization"] == "Bearer token")
        #expect(requests.first?.url.path == "/users/profiles/events", "the streams shared by every id observed")
        #expect(requests[1].streamMembers == ["42@2"], "resumes after the last version it got")
    }

    @Test func aStreamTheServiceEndsAfterItLivedIsResumedAtOnceWithAFreshToken() async throws {
        let v1 = FakeTransport.profile(id, "One", version: 1)
        let v2 = FakeTransport.profile(id, "Two", version: 2)
        let events = LivedEventTransport(firstLifetime: .milliseconds(1200), first: FakeEventTransport.event(v1), then: FakeEventTransport.event(v2))
        let minted = Mutex(0)
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://127.0.0.1:1")!)
        configuration.tokenProvider = { "token-\(minted.withLock { $0 += 1; return $0 })" }
        let client = ProfileClient(
            configuration: configuration, transport: FakeTransport { _, _ throws(TransportError) in FakeTransport.json(v1) },
            eventTransport: events, randomUnit: { 1 })  // the longest backoff, were there one
        let seen = await Self.collect(client.updates(for: id), count: 2)
        #expect(seen == [v1, v2])
        let requests = events.requests
        #expect(requests.count == 2)
        #expect(requests.last?.request.streamMembers == ["42@1"])
        let tokens = requests.map { $0.request.headers["Authorization"] }
        #expect(tokens[0] != tokens[1], "a fresh token for the new stream: \(tokens)")
        let gap = try #require(events.gapBeforeSecondRequest)
        #expect(gap < .milliseconds(150), "resumed after \(gap)")
    }

    @Test func followingDoesNotKeepTheClientAliveAndEndsWithIt() async throws {
        let events = FakeEventTransport([])  // one quiet stream that stays open
        var client: ProfileClient? = ProfileClient(
            configuration: ProfileClientConfiguration(baseURL: URL(string: "http://127.0.0.1:1")!),
            transport: FakeTransport { _, _ throws(TransportError) in FakeTransport.json(FakeTransport.profile(42, "x", version: 1)) },
            eventTransport: events, randomUnit: { 0 })
        let updates = client!.updates(for: id)
        let deadline = ContinuousClock.now + .seconds(5)
        while events.requests.isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(events.requests.count == 1, "following started")
        weak let released = client
        client = nil
        // The rows' list read in flight holds it until answered; the stream's task never does.
        #expect(await Eventually.waitAsync(timeout: .seconds(2), interval: .milliseconds(5)) { released == nil })
        var iterator = updates.makeAsyncIterator()
        #expect(await iterator.next() == nil, "observers end with the client")
    }

    @Test func anOlderEventNeverReplacesTheClientsOwnNewerWrite() async throws {
        let v1 = FakeTransport.profile(id, "One", version: 1)
        let v2 = FakeTransport.profile(id, "Mine", version: 2)
        let v3 = FakeTransport.profile(id, "Three", version: 3)
        // The stream is slow: it delivers v1 after this client already wrote v2, then v3.
        let events = FakeEventTransport([[FakeEventTransport.event(v1), FakeEventTransport.event(v3)]])
        let gate = Flag()
        let client = ProfileClient(
            configuration: ProfileClientConfiguration(baseURL: URL(string: "http://127.0.0.1:1")!),
            transport: FakeTransport { _, _ throws(TransportError) in FakeTransport.json(v2) },
            eventTransport: GatedEventTransport(events, gate: gate), randomUnit: { 0 })
        let updates = client.updates(for: id)
        _ = try await client.edit(id: id, ProfileChanges(displayName: "Mine"), expectedVersion: 1)
        gate.set()
        let seen = await Self.collect(updates, count: 2)
        #expect(seen.map { $0.version } == [2, 3], "v1 from the stream is never shown after the own v2")
    }
}

/// A first stream that lives `firstLifetime` and is then ended by the service; a second that
/// sends one event and stays open. Records when each request came and when the first ended.
final class LivedEventTransport: EventStreamTransport {
    private let firstLifetime: Duration
    private let first: ServerSentEvent
    private let then: ServerSentEvent
    private let log = Mutex<[(request: TransportRequest, at: ContinuousClock.Instant)]>([])
    private let firstEnded = Mutex<ContinuousClock.Instant?>(nil)

    init(firstLifetime: Duration, first: ServerSentEvent, then: ServerSentEvent) {
        self.firstLifetime = firstLifetime
        self.first = first
        self.then = then
    }

    var requests: [(request: TransportRequest, at: ContinuousClock.Instant)] { log.withLock { $0 } }

    var gapBeforeSecondRequest: Duration? {
        guard let ended = firstEnded.withLock({ $0 }), requests.count > 1 else { return nil }
        return requests[1].at - ended
    }

    func stream(_ request: TransportRequest, onEvents: @escaping @Sendable ([ServerSentEvent]) async -> Void)
        async throws(TransportError) -> EventStreamEnd
    {
        let index = log.withLock { log in
            log.append((request, ContinuousClock.now))
            return log.count
        }
        if index == 1 {
            await onEvents([first])
            try? await Task.sleep(for: firstLifetime)
            firstEnded.withLock { $0 = ContinuousClock.now }
            return .closed(retry: nil)
        }
        await onEvents([then])
        try? await Task.sleep(for: .seconds(60))
        throw TransportError(kind: .other, description: "cancelled")
    }
}

final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}

/// Holds every stream back until `gate` is set.
final class GatedEventTransport: EventStreamTransport {
    let inner: FakeEventTransport
    let gate: Flag

    init(_ inner: FakeEventTransport, gate: Flag) {
        self.inner = inner
        self.gate = gate
    }

    func stream(_ request: TransportRequest, onEvents: @escaping @Sendable ([ServerSentEvent]) async -> Void)
        async throws(TransportError) -> EventStreamEnd
    {
        while !gate.isSet { try? await Task.sleep(for: .milliseconds(5)) }
        return try await inner.stream(request, onEvents: onEvents)
    }
}

@Suite struct ServerSentEventParserTests {
    @Test func parsesFieldsCommentsAndEveryLineEnding() {
        let text = "retry: 2000\n\n: heartbeat\r\nevent: profile\r\nid: 7\r\ndata: {\"a\":1}\r\n\r\nevent: profile\rid: 8\rdata: x\rdata: y\r\r"
        var whole = ServerSentEventParser()
        let events = whole.feed(Array(text.utf8))
        #expect(events == [
            ServerSentEvent(event: "profile", id: "7", data: #"{"a":1}"#),
            ServerSentEvent(event: "profile", id: "8", data: "x\ny"),
        ])
        #expect(whole.retryMilliseconds == 2000)
        var byteByByte = ServerSentEventParser()
        #expect(Array(text.utf8).flatMap { byteByByte.feed([$0]) } == events)
    }
}
