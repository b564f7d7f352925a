import Foundation
import HTTP1
import HTTPServer
import Logging
import ProfileAuth
import ProfileService
import ProfileServiceTesting
import TestSupport
import Testing

/// A request is classified once, on its loop (docs/design.md §6): through the whole server —
/// two loops, the batch lane, workers' batches, misses loaded together, writes made together,
/// lists, event streams — each read's path and floor are parsed once, each write's path and body
/// once, each list's ids once, each stream's id (or ids) and `Last-Event-ID` once, and each token
/// is verified once.
@Suite struct ParseOnceTests {
    @Test func everyRequestIsParsedAndVerifiedOnce() throws {
        let secretFile = FileManager.default.temporaryDirectory.appendingPathComponent("parse-once-\(UUID()).secret")
        try Data(repeating: UInt8(ascii: "p"), count: 48).write(to: secretFile)
        defer { try? FileManager.default.removeItem(at: secretFile) }
        let verifier = try TokenVerifier(configuration: AuthConfiguration(key: .secretFile(secretFile.path)))
        let minter = try TokenMinter(secretFile: secretFile.path)
        let backends = try InMemoryBackends()
        let profiles = try (0..<12).map { _ in try backends.seed() }

        var logger = Logger(label: "parse-once")
        logger.logLevel = .critical
        let counts = ParseCounts()
        let shared = ProfileCacheShared()
        let eventStreams = EventStreams()
        let responder = ProfileResponder(
            lifecycle: ServiceLifecycle(), authorization: .required(verifier, forReads: true),
            liveUpdates: ProfileUpdateHub(streams: eventStreams, logger: logger), logger: logger, parseCounts: counts
        ) { [logger] _ in
            ProfileWorker(
                store: InMemoryBackends.database.store(), cache: InMemoryBackends.cluster.client(), shared: shared,
                logger: logger)
        }
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.eventLoopCount = 2
        configuration.workerCount = 2
        configuration.batchWorkerCount = 2
        let server = HTTPServer(configuration: configuration, responder: responder, logger: logger, eventStreams: eventStreams)
        let port = try server.start()
        defer {
            server.shutdown()
            server.waitUntilStopped()
        }

        func get(_ profile: Profile, floor: Int32) -> String {
            "GET /users/profile/\(profile.id)?min_version=\(floor) HTTP/1.1\r\nHost: t\r\n"
                + "Authorization: Bearer \(minter.token(subject: "reader"))\r\n\r\n"
        }
        func put(_ profile: Profile, name: String) -> String {
            let body = #"{"display_name":"\#(name)","version":1}"#
            return "PUT /users/profile/\(profile.id) HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                + "Authorization: Bearer \(minter.token(subject: String(profile.id)))\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
        }
        // Each client pipelines its requests in one write, so the loops hand them on together and
        // the lane takes them in batches: misses first (loaded together), then hits.
        let clients = try (0..<4).map { _ in try HTTPTestClient(port: port) }
        var sent = [0, 0, 0, 0]
        for round in 0..<2 {
            for (index, client) in clients.enumerated() {
                let mine = profiles.enumerated().filter { $0.offset % clients.count == index }.map(\.element)
                try client.send(mine.map { get($0, floor: 1) }.joined())
                sent[index] += mine.count
                _ = round
            }
        }
        for (index, client) in clients.enumerated() {
            for _ in 0..<sent[index] { #expect(try client.readResponse().status == 200) }
        }
        let reads = sent.reduce(0, +)
        // Updates, pipelined too: the lane hands them on as groups made together.
        for (index, client) in clients.enumerated() {
            let mine = profiles.enumerated().filter { $0.offset % clients.count == index }.map(\.element)
            try client.send(mine.map { put($0, name: "Once \($0.id)") }.joined())
        }
        for (index, client) in clients.enumerated() {
            for _ in 0..<(sent[index] / 2) {
                let response = try client.readResponse()
                #expect(response.status == 200, "\(response.bodyText)")
            }
        }
        // Patches without If-Match, pipelined: made together as the updates are (one statement).
        func patch(_ profile: Profile, bio: String) -> String {
            let body = #"{"bio":"\#(bio)"}"#
            return "PATCH /users/profile/\(profile.id) HTTP/1.1\r\nHost: t\r\nContent-Type: application/merge-patch+json\r\n"
                + "Authorization: Bearer \(minter.token(subject: String(profile.id)))\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
        }
        // Whether a lane batch holds two of them depends on timing: a few rounds at most.
        let statementsBefore = shared.statistics.count(.databaseBatchWrite)
        var patchRounds = 0
        while patchRounds < 5, shared.statistics.count(.databaseBatchWrite) == statementsBefore {
            patchRounds += 1
            for (index, client) in clients.enumerated() {
                let mine = profiles.enumerated().filter { $0.offset % clients.count == index }.map(\.element)
                try client.send(mine.map { patch($0, bio: "Bio \($0.id)") }.joined())
            }
            for (index, client) in clients.enumerated() {
                for _ in 0..<(sent[index] / 2) {
                    let response = try client.readResponse()
                    #expect(response.status == 200, "\(response.bodyText)")
                    #expect(response.bodyText.contains(#""bio":"Bio "#) && response.bodyText.contains(#""version":\#(2 + patchRounds)"#))
                }
            }
        }
        #expect(shared.statistics.count(.databaseBatchWrite) > statementsBefore, "patches were made together")
        let writes = (1 + patchRounds) * profiles.count

        // Lists, pipelined, and one the classification refuses: each list's ids parsed once.
        let reader = "Bearer \(minter.token(subject: "reader"))"
        func list(_ members: [Profile]) -> String {
            "GET /users/profiles?ids=\(members.map { "\($0.id)@1" }.joined(separator: ",")) HTTP/1.1\r\nHost: t\r\n"
                + "Authorization: \(reader)\r\n\r\n"
        }
        for (index, client) in clients.enumerated() {
            let mine = profiles.enumerated().filter { $0.offset % clients.count == index }.map(\.element)
            try client.send(list(mine) + list(mine.reversed()))
        }
        for client in clients {
            for _ in 0..<2 {
                let response = try client.readResponse()
                #expect(response.status == 200 && response.bodyText.contains(#""missing":[]"#), "\(response.bodyText)")
            }
        }
        try clients[0].send("GET /users/profiles?ids=0 HTTP/1.1\r\nHost: t\r\nAuthorization: \(reader)\r\n\r\n")
        let refusedList = try clients[0].readResponse()
        #expect(refusedList.status == 400 && refusedList.bodyText.contains("invalid-ids"), "\(refusedList.bodyText)")
        let lists = 2 * clients.count + 1

        // Event streams: a profile's by either path (one with Last-Event-ID), and a list's.
        let streams = try [
            EventStreamTestClient(
                port: port, path: "/users/profile/\(profiles[0].id)/events", headers: ["Authorization": reader, "Last-Event-ID": "1"]),
            EventStreamTestClient(port: port, path: "/users/profile/\(profiles[1].id)", headers: ["Authorization": reader]),
            EventStreamTestClient(
                port: port, path: "/users/profiles/events?ids=\(profiles.map { String($0.id) }.joined(separator: ","))",
                headers: ["Authorization": reader]),
        ]
        for stream in streams { #expect(try stream.head().status == 200) }
        defer { for stream in streams { stream.close() } }

        #expect(counts.paths == reads + writes + 2, "one path parse per request of a profile (a stream's too)")
        #expect(counts.floors == reads + 2, "one floor parse per read, one Last-Event-ID parse per profile's stream")
        #expect(counts.bodies == writes, "one body parse per write or patch")
        #expect(counts.lists == lists + 1, "one ids parse per list or list's stream")
        #expect(counts.tokens == reads + writes + lists + streams.count, "one token verification per request")
        #expect(shared.statistics.count(.hit) > 0 && shared.statistics.count(.miss) > 0, "hits and misses both ran")
    }
}
