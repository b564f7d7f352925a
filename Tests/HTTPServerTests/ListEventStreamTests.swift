import HTTP1
import HTTPServer
import Testing
import TestSupport

/// A stream of several topics (a list's stream, docs/design.md §4.1): events of each topic reach
/// it in order, the end of one topic is an event on it and the stream goes on, a topic that
/// comes back after its end is delivered again, and closing the stream releases every topic.
@Suite struct ListEventStreamTests {
    /// `GET /?1,2,3` opens one stream of topics 1, 2 and 3, each at position 1; `GET /one?7` a
    /// stream of topic 7 alone (a profile's stream).
    final class ListResponder: SingleRequestResponder {
        let streams: EventStreams
        init(streams: EventStreams) { self.streams = streams }
        func makeWorker(index: Int) throws {}
        func respond(to request: HTTPRequest, worker: Void) -> HTTPResponse {
            let topics = request.target.split(separator: "?").last?.split(separator: ",").compactMap { Int64($0) } ?? []
            streams.retain(topics: topics)
            var response = HTTPResponse(
                status: .ok, headers: ["Content-Type": "text/event-stream"], body: Array("retry: 1000\n\n".utf8))
            response.eventStream =
                request.target.hasPrefix("/one")
                ? HTTPResponse.EventStream(topic: topics[0], position: 1, client: "tester")
                : HTTPResponse.EventStream(subscriptions: topics.map { .init(topic: $0, position: 1) }, client: "tester")
            return response
        }
    }

    private static func event(_ name: String, _ data: String) -> [UInt8] {
        Array("event: \(name)\ndata: \(data)\n\n".utf8)
    }

    private func withServer(
        _ configure: (inout EventStreams.Configuration) -> Void = { _ in },
        _ body: (Int, EventStreams) throws -> Void
    ) throws {
        var configuration = EventStreams.Configuration()
        configure(&configuration)
        let streams = EventStreams(configuration: configuration)
        let server = HTTPServer(
            configuration: testConfiguration(), responder: ListResponder(streams: streams), logger: testLogger,
            eventStreams: streams)
        let port = try server.start()
        defer {
            server.shutdown()
            server.waitUntilStopped()
        }
        try body(port, streams)
    }

    @Test func eachTopicsEventsReachTheOneStreamInOrderAndOlderOnesAreSkipped() throws {
        try withServer { port, streams in
            let stream = try EventStreamTestClient(port: port, path: "/?1,2,3")
            #expect(try stream.head().status == 200)
            #expect(eventually { streams.statistics.subscriptions == 3 })
            streams.publish(topic: 2, position: 2, bytes: Self.event("profile", "2@2"))
            streams.publish(topic: 1, position: 5, bytes: Self.event("profile", "1@5"))
            streams.publish(topic: 1, position: 4, bytes: Self.event("profile", "1@4"))  // older: dropped
            streams.publish(topic: 3, position: 1, bytes: Self.event("profile", "3@1"))  // what the head had
            streams.publish(topic: 9, position: 9, bytes: Self.event("profile", "9@9"))  // not followed
            let events = try stream.drainEvents(quietFor: .milliseconds(300)).map(\.data)
            #expect(events == ["2@2", "1@5"])
            #expect(streams.statistics.subscribers == 1, "a stream of three topics is one stream")
        }
    }

    @Test func theEndOfATopicIsAnEventOfTheListsStreamWhichGoesOnAndSeesTheTopicComeBack() throws {
        try withServer { port, streams in
            let stream = try EventStreamTestClient(port: port, path: "/?1,2")
            #expect(try stream.head().status == 200)
            #expect(eventually { streams.statistics.subscriptions == 2 })
            streams.publish(topic: 1, position: 3, bytes: Self.event("profile", "1@3"))
            streams.closeStreams(topic: 1, position: 3, bytes: Self.event("deleted", "1"))
            // A fetch of version 3 that finishes after the deletion cannot bring it back...
            streams.publish(topic: 1, position: 3, bytes: Self.event("profile", "1@3 again"))
            // ...the profile created again above its last version can.
            streams.publish(topic: 1, position: 4, bytes: Self.event("profile", "1@4"))
            streams.publish(topic: 2, position: 2, bytes: Self.event("profile", "2@2"))
            let events = try stream.drainEvents(quietFor: .milliseconds(300)).map { "\($0.event ?? "")=\($0.data)" }
            #expect(events == ["profile=1@3", "deleted=1", "profile=1@4", "profile=2@2"])
            #expect(!stream.isClosed)
            #expect(streams.statistics.subscribers == 1)
        }
    }

    @Test func closingTheStreamReleasesEveryTopicAndTheClientsPlace() throws {
        try withServer { port, streams in
            #expect(streams.reserve(client: "tester"))  // the responder's stream is counted by the test
            let stream = try EventStreamTestClient(port: port, path: "/?4,5,6")
            #expect(try stream.head().status == 200)
            #expect(eventually { streams.statistics.subscriptions == 3 })
            #expect(streams.isWatched(topic: 5))
            stream.close()
            #expect(eventually { streams.statistics.subscribers == 0 && streams.statistics.subscriptions == 0 })
            #expect(!streams.isWatched(topic: 4) && !streams.isWatched(topic: 5) && !streams.isWatched(topic: 6))
            #expect(streams.openStreams(client: "tester") == 0)
        }
    }

    @Test func aStreamThatWouldExceedTheSubscriptionBoundIsRefusedWithRetryAfter() throws {
        try withServer({ $0.maxSubscriptions = 4 }) { port, streams in
            let first = try EventStreamTestClient(port: port, path: "/?1,2,3")
            #expect(try first.head().status == 200)
            let second = try EventStreamTestClient(port: port, path: "/?4,5")
            let refused = try second.head()
            #expect(refused.status == 503)
            #expect(refused.header("Retry-After") != nil)
            #expect(!streams.isWatched(topic: 4), "the refused stream's topics are released")
            let third = try EventStreamTestClient(port: port, path: "/?4")
            #expect(try third.head().status == 200, "one more topic still fits")
        }
    }

    /// The end of a topic is its last event on every stream: a profile's own stream hears
    /// `deleted` and ends (its client need not reconnect to learn it from a 404), a list's goes on.
    @Test func aTopicsEndIsTheLastEventOfItsStreamOfOneAndAnEventOnTheListsStream() throws {
        try withServer { port, streams in
            let list = try EventStreamTestClient(port: port, path: "/?7,8")
            let single = try EventStreamTestClient(port: port, path: "/one?7")
            #expect(try list.head().status == 200)
            #expect(try single.head().status == 200)
            #expect(eventually { streams.statistics.subscriptions == 3 })
            streams.closeStreams(topic: 7, position: 2, bytes: Self.event("deleted", "7"))
            let last = try single.nextEvent(within: .seconds(5))
            #expect(last?.event == "deleted" && last?.data == "7")
            #expect(single.waitForClose(within: .seconds(5)), "a profile's stream ends with its profile")
            let events = try list.drainEvents(quietFor: .milliseconds(300))
            #expect(events.map(\.event) == ["deleted"])
            #expect(!list.isClosed, "the list's stream goes on")
            #expect(eventually { streams.statistics.subscriptions == 2 })
        }
    }
}
