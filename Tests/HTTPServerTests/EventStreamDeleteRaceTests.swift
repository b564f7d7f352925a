import HTTP1
import HTTPServer
import Testing
import TestSupport

/// A delete that arrives while a worker opens a stream of the profile (after it retained the
/// topic and read the profile, before the loop registers the stream) closes that stream (issue 25).
@Suite struct EventStreamDeleteRaceTests {
    /// Opens a stream of topic 1 and, between reading and answering, publishes its deletion.
    final class DeletingResponder: SingleRequestResponder {
        let streams: EventStreams
        init(streams: EventStreams) { self.streams = streams }
        func makeWorker(index: Int) throws {}
        func respond(to request: HTTPRequest, worker: Void) -> HTTPResponse {
            streams.retain(topic: 1)
            // ... the worker reads the profile at version 3 here; the profile is deleted meanwhile:
            streams.closeStreams(topic: 1)
            var response = HTTPResponse(
                status: .ok, headers: ["Content-Type": "text/event-stream"], body: Array("id: 3\ndata: {}\n\n".utf8))
            response.eventStream = HTTPResponse.EventStream(topic: 1, position: 3)
            return response
        }
    }

    @Test func aDeleteBetweenTheReadAndTheRegistrationClosesTheStream() throws {
        let streams = EventStreams()
        let server = HTTPServer(
            configuration: testConfiguration(), responder: DeletingResponder(streams: streams), logger: testLogger,
            eventStreams: streams)
        let port = try server.start()
        defer {
            server.shutdown()
            server.waitUntilStopped()
        }
        let client = try HTTPTestClient(port: port)
        try client.send("GET /users/profile/1/events HTTP/1.1\r\nHost: a\r\n\r\n")
        let received = String(decoding: try client.readToEnd(), as: UTF8.self)
        #expect(received.contains("200"), "the stream's head went out")
        #expect(eventually { streams.statistics.subscribers == 0 }, "the stream is closed, not left open on a deleted profile")
        #expect(eventually { !streams.isWatched(topic: 1) }, "and the topic released")
    }
}
