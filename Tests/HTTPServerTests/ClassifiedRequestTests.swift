import HTTP1
import Synchronization
import TestSupport
import Testing

@testable import HTTPServer

/// Counts the values of a test alive: each ``Token`` is one until it is released.
final class LiveCount: Sendable {
    let count = Atomic<Int>(0)
    var live: Int { count.load(ordering: .relaxed) }
}

/// A reference a classified value holds, so that a value kept or dropped twice shows.
final class Token: Sendable {
    let count: LiveCount

    init(_ count: LiveCount) {
        self.count = count
        count.count.add(1, ordering: .relaxed)
    }

    deinit { count.count.subtract(1, ordering: .relaxed) }
}

/// What ``TaggingResponder`` makes of a head: what it saw of it, and a token.
struct Tag: Sendable {
    var seen: String
    var bodyFollows: Bool
    var token: Token
}

/// Tags each request on its head and answers with the tag its worker got. Requests under `/lane/`
/// go to the batch lane; those under `/on/` are handed on alone, their tag rewritten.
final class TaggingResponder: HTTPResponder {
    let live = LiveCount()

    func makeWorker(index: Int) throws {}
    func batchLimit(worker: Void) -> Int { 8 }

    func classify(head: HTTPRequest, bodyFollows: Bool) -> RequestClassification<Tag> {
        .accept(
            Tag(seen: "\(head.method) \(head.path)", bodyFollows: bodyFollows, token: Token(live)),
            toBatchLane: head.path.hasPrefix("/lane/"))
    }

    func respond(
        to batch: [BatchedRequest<Tag>], from origin: BatchOrigin, worker: Void,
        answer: (BatchedRequest<Tag>, HTTPResponse) -> Void
    ) -> [[BatchedRequest<Tag>]] {
        var handedOn: [[BatchedRequest<Tag>]] = []
        for var member in batch {
            if origin != .handedOn, member.request.path.hasPrefix("/on/") {
                member.classified.seen = "handed on: " + member.classified.seen
                handedOn.append([member])
                continue
            }
            let tag = member.classified
            answer(
                member,
                HTTPResponse(
                    status: .ok,
                    headers: [
                        "X-Seen": tag.seen, "X-Body-Follows": "\(tag.bodyFollows)", "X-Origin": "\(origin)",
                    ],
                    body: member.request.body))
        }
        return handedOn
    }
}

@Suite struct ClassifiedRequestTests {
    @Test func slotsKeepTheirValuesAndReleaseEachOnce() {
        let live = LiveCount()
        do {
            let slots = TypedSlots<Tag>(capacity: 2)
            slots.put(Tag(seen: "a", bodyFollows: false, token: Token(live)), at: 0)
            slots.put(Tag(seen: "b", bodyFollows: true, token: Token(live)), at: 1)
            slots.put(Tag(seen: "b2", bodyFollows: true, token: Token(live)), at: 1)
            #expect(live.live == 2, "a value put over another releases it")
            slots.grow(to: 8)
            #expect(slots.capacity == 8)
            #expect(slots.take(at: 1).seen == "b2", "growing keeps what the slots hold")
            #expect(live.live == 1)
            slots.discard(at: 1)
            slots.put(Tag(seen: "c", bodyFollows: false, token: Token(live)), at: 7)
            slots.discard(at: 0)
            #expect(live.live == 1)
        }
        #expect(live.live == 0, "the slots release what they hold when they go")
    }

    /// Classified on its head, before its body is read; answered with that value, typed — also
    /// pipelined behind others, from the batch lane, and handed on with a new value.
    @Test func eachRequestIsAnsweredWithWhatItsHeadWasClassifiedAs() throws {
        let responder = TaggingResponder()
        let configure: (inout HTTPServerConfiguration) -> Void = {
            $0.workerCount = 2
            $0.batchWorkerCount = 1
            $0.eventLoopCount = 1
        }
        try withServer(responder, configure: configure) { port, _ in
            let client = try HTTPTestClient(port: port)
            try client.send("PUT /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nab")
            usleepMilliseconds(20)
            try client.send("cde")
            let put = try client.readResponse()
            #expect(put.header("X-Seen") == "PUT /p" && put.header("X-Body-Follows") == "true")
            #expect(put.bodyText == "abcde")

            try client.send(
                "GET /g HTTP/1.1\r\nHost: a\r\n\r\nPOST /q HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nxy"
                    + "GET /lane/l HTTP/1.1\r\nHost: a\r\n\r\nGET /on/o HTTP/1.1\r\nHost: a\r\n\r\n")
            let get = try client.readResponse()
            #expect(get.header("X-Seen") == "GET /g" && get.header("X-Body-Follows") == "false")
            let post = try client.readResponse()
            #expect(post.header("X-Seen") == "POST /q" && post.bodyText == "xy")
            let lane = try client.readResponse()
            #expect(lane.header("X-Seen") == "GET /lane/l" && lane.header("X-Origin") == "lane")
            let handedOn = try client.readResponse()
            #expect(handedOn.header("X-Seen") == "handed on: GET /on/o" && handedOn.header("X-Origin") == "handedOn")
            #expect(eventually { responder.live.live == 0 }, "every value answered is released")
        }
        #expect(responder.live.live == 0)
    }

    /// A connection that closes while its body is read: what its head was classified as goes
    /// with it.
    @Test func aHeadClassifiedForABodyThatNeverCameIsReleasedWithItsConnection() throws {
        let responder = TaggingResponder()
        try withServer(responder, configure: { $0.eventLoopCount = 1 }) { port, _ in
            let client = try HTTPTestClient(port: port)
            try client.send("PUT /p HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc")
            #expect(eventually { responder.live.live == 1 }, "classified on its head")
            client.close()
            #expect(eventually { responder.live.live == 0 })
            // The descriptor is reused: a new connection's request gets its own value.
            let next = try HTTPTestClient(port: port)
            try next.send("PUT /n HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nz")
            #expect(try next.readResponse().header("X-Seen") == "PUT /n")
        }
        #expect(responder.live.live == 0)
    }
}
