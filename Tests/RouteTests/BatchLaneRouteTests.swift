import HTTP1
import Logging
import MemcachedClient
import HTTPServer
import ProfileService
import ProfileServiceTesting
import Testing

/// The batch lane's side of the responder (docs/design.md §9): hits answered from one multi-get,
/// misses handed on to be loaded together, everything else alone — and the loaded answers as a
/// read alone would give them.
@Suite struct BatchLaneRouteTests {
    private func get(_ target: String, headers: HTTPHeaders = [:]) -> HTTPRequest {
        HTTPRequest(method: .get, target: target, headers: headers)
    }

    /// `requests` classified as their loop classifies them, as one batch, each tagged with its
    /// position (``BatchedRequest/position``); those refused on their head are left out, with
    /// their answers.
    private func batch(
        _ requests: [HTTPRequest], of responder: ProfileResponder
    ) -> (members: [BatchedRequest<ClassifiedRequest>], toLane: [Bool], refused: [Int: HTTPResponse]) {
        var members: [BatchedRequest<ClassifiedRequest>] = []
        var toLane: [Bool] = []
        var refused: [Int: HTTPResponse] = [:]
        for (position, request) in requests.enumerated() {
            var request = request
            request.headers.add(name: BatchedRequest<ClassifiedRequest>.positionField, value: "\(position)")
            switch responder.classify(head: request, bodyFollows: !request.body.isEmpty) {
            case .accept(let classified, let lane):
                members.append(BatchedRequest(request: request, classified: classified))
                toLane.append(lane)
            case .refuse(let response):
                refused[position] = response
            }
        }
        return (members, toLane, refused)
    }

    /// Answers `members` as a batch from `origin`; returns the answers by position and the
    /// positions of what it handed on, in its groups.
    private func respond(
        _ members: [BatchedRequest<ClassifiedRequest>], from origin: BatchOrigin, responder: ProfileResponder,
        worker: ProfileWorker
    ) -> (answered: [Int: HTTPResponse], handedOn: [[BatchedRequest<ClassifiedRequest>]]) {
        var answered: [Int: HTTPResponse] = [:]
        let handedOn = responder.respond(to: members, from: origin, worker: worker) { answered[$0.position] = $1 }
        return (answered, handedOn)
    }

    private func answers(
        _ requests: [HTTPRequest], from origin: BatchOrigin, responder: ProfileResponder, worker: ProfileWorker
    ) -> [Int: HTTPResponse] {
        respond(batch(requests, of: responder).members, from: origin, responder: responder, worker: worker).answered
    }

    @Test func hitsAreAnsweredMissesGoTogetherAndTheRestAlone() throws {
        let service = try InProcessService()
        let cached = InProcessService.newID()
        #expect(service.create(cached).status == .created)
        #expect(service.get(cached).status == .ok, "cached now")
        let missing = (0..<3).map { _ in InProcessService.newID() }
        for id in missing { #expect(service.create(id).status == .created) }
        // Created through the service, so cached: make them misses again.
        for id in missing { _ = InMemoryBackends.cluster.client().delete("profile-service:v1:\(id)") }
        let requests = [
            get("/users/profile/\(cached)"), get("/users/profile/\(missing[0])"),
            HTTPRequest(method: .put, target: "/users/profile/\(cached)"), get("/users/profile/\(missing[1])"),
            get("/users/profile/\(cached)?min_version=9"), get("/users/profile/\(missing[2])"),
        ]
        let (members, toLane, _) = batch(requests, of: service.responder)
        #expect(toLane == [true, true, false, true, true, true], "reads and writes of profiles; a PUT without a token is refused")

        let (answered, handedOn) = respond(members, from: .lane, responder: service.responder, worker: service.worker)
        #expect(Set(answered.keys) == [0], "only the hit is answered in the lane")
        #expect(answered[0]?.status == .ok)
        #expect(handedOn.map { $0.map(\.position) } == [[2], [4], [1, 3, 5]], "the misses together, the rest alone")

        let (loaded, _) = respond(handedOn[2], from: .handedOn, responder: service.responder, worker: service.worker)
        for (position, id) in zip([1, 3, 5], missing) {
            #expect(loaded[position]?.status == .ok)
            #expect(loaded[position]?.json?["id"] as? Int64 == id)
            #expect(loaded[position]?.headers["ETag"] == "\"1\"")
        }
        #expect(service.shared.statistics.count(.databaseBatchRead) == 1, "the three misses in one query")
        #expect(service.shared.statistics.count(.populateStored) >= 3)
        // Populated: read alone now, each is a hit.
        for id in missing { #expect(service.get(id).headers["X-Cache"] == "hit") }
    }

    private func put(_ service: InProcessService, _ id: Int64, _ body: String, headers: HTTPHeaders = [:]) -> HTTPRequest {
        var headers = headers
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Authorization", value: "Bearer \(service.token(for: id))")
        return HTTPRequest(method: .put, target: "/users/profile/\(id)", headers: headers, body: Array(body.utf8))
    }

    /// Writes go on as one group, their bodies unparsed; a token that may not write is refused on
    /// its head (403), before any batch. The worker that takes the group parses each body once and
    /// makes the updates together, each answered as alone: 200 with the new profile, 409 for a
    /// stale version — and the new versions are cached; the creation and the refused body are
    /// answered alone.
    @Test func updatesGoTogetherAndEachIsAnsweredAsAlone() throws {
        let counts = ParseCounts()
        let service = try InProcessService(parseCounts: counts)
        let ids = (0..<4).map { _ in InProcessService.newID() }
        for id in ids { #expect(service.create(id).status == .created) }
        let (bodiesBefore, tokensBefore) = (counts.bodies, counts.tokens)
        let fresh = InProcessService.newID()
        var foreign = put(service, ids[3], #"{"display_name":"Not yours","version":1}"#)
        foreign.headers.replaceOrAdd(name: "Authorization", value: "Bearer \(service.token(for: ids[0]))")
        let requests = [
            put(service, ids[0], #"{"display_name":"Zero","version":1}"#),
            put(service, fresh, #"{"username":"u\#(fresh % 1_000_000_000)","display_name":"New"}"#, headers: ["If-None-Match": "*"]),
            put(service, ids[1], #"{"display_name":"One","version":1}"#),
            put(service, ids[2], #"{"display_name":"Two","version":5}"#),
            put(service, ids[2], #"{"display_name":"#),
            foreign,
        ]
        let (members, _, refused) = batch(requests, of: service.responder)
        #expect(refused.keys.sorted() == [5] && refused[5]?.status == .forbidden, "refused on its head")
        let (answered, handedOn) = respond(members, from: .lane, responder: service.responder, worker: service.worker)
        #expect(answered.isEmpty, "the lane answers no write")
        #expect(handedOn.map { $0.map(\.position) } == [[0, 1, 2, 3, 4]], "the writes as one group")
        #expect(counts.bodies == bodiesBefore, "the lane parses no body")

        let statementsBefore = service.shared.statistics.count(.databaseBatchWrite)
        let (written, _) = respond(handedOn[0], from: .handedOn, responder: service.responder, worker: service.worker)
        #expect(service.shared.statistics.count(.databaseBatchWrite) == statementsBefore + 1, "the updates in one statement")
        #expect(written[0]?.status == .ok && written[0]?.json?["display_name"] as? String == "Zero")
        #expect(written[0]?.headers["ETag"] == "\"2\"")
        #expect(written[2]?.status == .ok && written[2]?.json?["version"] as? Int == 2)
        #expect(written[3]?.status == .conflict && written[3]?.problemKind == "version-conflict")
        #expect(written[1]?.status == .created && written[4]?.status == .badRequest)
        #expect(counts.bodies - bodiesBefore == 5, "the group's worker parsed each body once")
        #expect(counts.tokens - tokensBefore == 6, "each token verified once, on its head")
        #expect(service.shared.statistics.count(.writeThroughStored) >= 2)
        for id in ids[..<2] {
            let read = service.get(id)
            #expect(read.headers["X-Cache"] == "hit" && read.headers["ETag"] == "\"2\"", "written through")
        }
        #expect(service.get(ids[3]).headers["ETag"] == "\"1\"", "the refused write changed nothing")
    }

    @Test func aMissForAProfileThatDoesNotExistIsA404FromTheLoad() throws {
        let service = try InProcessService()
        let absent = [InProcessService.newID(), InProcessService.newID()]
        let loaded = answers(
            absent.map { get("/users/profile/\($0)") }, from: .handedOn, responder: service.responder, worker: service.worker)
        #expect(loaded[0]?.status == .notFound && loaded[1]?.status == .notFound)
        #expect(service.shared.statistics.count(.databaseBatchRead) == 1)
    }

    /// PostgreSQL down: the group's one query fails and every read of it answers 503 at once,
    /// none reads again alone.
    @Test func aFailedLoadAnswersEveryReadOfTheGroup503WithoutReadingAgain() throws {
        let database = InMemoryDatabase()
        let service = try InProcessService(database: database)
        let ids = (0..<3).map { _ in InProcessService.newID() }
        for id in ids { #expect(service.create(id).status == .created) }
        for id in ids { _ = InMemoryBackends.cluster.client().delete("profile-service:v1:\(id)") }
        database.setUnavailable(true)
        let readsBefore = database.reads
        let loaded = answers(
            ids.map { get("/users/profile/\($0)") }, from: .handedOn, responder: service.responder, worker: service.worker)
        #expect((0..<3).allSatisfy { loaded[$0]?.status == .serviceUnavailable })
        #expect(database.reads - readsBefore <= 1, "one query for the group, none per read")
        database.setUnavailable(false)
        for id in ids { #expect(service.get(id).status == .ok, "no lease was left behind") }
    }

    /// A node that fails the lane's multi-get: its reads are left to the other workers (which
    /// read PostgreSQL), never answered in the lane, which must not wait on PostgreSQL.
    @Test func readsOfAFailedNodeAreLeftAloneNotReadFromPostgreSQLInTheLane() throws {
        let cluster = InMemoryCache(nodes: 2)
        let database = InMemoryDatabase()
        let backends = try InMemoryBackends(cluster: cluster, database: database)
        let profiles = try (0..<8).map { _ in try backends.seed() }
        var logger = Logger(label: "lane-test")
        logger.logLevel = .critical
        let shared = ProfileCacheShared()
        let responder = ProfileResponder(lifecycle: ServiceLifecycle(), authorization: .disabled, logger: logger) { [logger] _ in
            ProfileWorker(store: database.store(), cache: cluster.client(), shared: shared, logger: logger)
        }
        let worker = try responder.makeWorker(index: 0)
        for profile in profiles { #expect(responder.respond(to: get("/users/profile/\(profile.id)"), worker: worker).status == .ok) }
        let failed = try #require(cluster.server(forKey: "profile-service:v1:\(profiles[0].id)") as MemcachedServer?)
        cluster.fail(failed)
        let readsBefore = database.reads
        let members = batch(profiles.map { get("/users/profile/\($0.id)") }, of: responder).members
        let (answered, handedOn) = respond(members, from: .lane, responder: responder, worker: worker)
        #expect(database.reads == readsBefore, "the lane read nothing from PostgreSQL")
        let alone = handedOn.compactMap { $0.count == 1 ? $0[0].position : nil }
        #expect(!alone.isEmpty && alone.count == handedOn.count, "each alone, none together")
        #expect(Set(answered.keys).isDisjoint(with: alone))
        #expect(answered.count + alone.count == profiles.count)
    }
}

extension BatchedRequest {
    /// The header that tags a test's request with its position among the requests of its batch.
    fileprivate static var positionField: String { "X-Test-Position" }

    /// The position `batch(_:of:)` tagged its request with: a member carries its connection, not
    /// its position, so a test tells its answers and its groups apart by this.
    fileprivate var position: Int { request.headers[Self.positionField].flatMap { Int($0) } ?? -1 }
}
