import Foundation
public import HTTP1
import HTTPServer
import Logging
import ProfileAuth
public import ProfileService

/// The service's responder in process: a request in, its response out — no socket, no server,
/// no PostgreSQL or memcached (in-memory backends). Every route, status, header and problem
/// document can be tested in microseconds; the wire (parsing, keep-alive, streams) is the HTTP
/// server's tests' job.
///
/// ```swift
/// let service = try InProcessService()
/// let created = service.put(42, #"{"username":"ada","display_name":"Ada"}"#, token: service.token(for: 42), create: true)
/// #expect(created.status == .created)
/// ```
public final class InProcessService {
    public let responder: ProfileResponder
    public let worker: ProfileWorker
    public let shared: ProfileCacheShared
    private let minter: TokenMinter

    /// - Parameters:
    ///   - requireAuthForReads: `--require-auth-for-reads`.
    ///   - liveUpdates: with event streams (their first answer only: the stream itself is the
    ///     server's).
    ///   - database: the database of the test's own when it makes it unavailable.
    ///   - parseCounts: counts what the request path parses.
    public init(
        requireAuthForReads: Bool = false, liveUpdates: Bool = true, database: InMemoryDatabase = InMemoryBackends.database,
        parseCounts: ParseCounts? = nil, authorization: ProfileAuthorization? = nil
    ) throws {
        let secretFile = FileManager.default.temporaryDirectory.appendingPathComponent("in-process-\(UUID()).secret")
        try Data(repeating: UInt8(ascii: "s"), count: 48).write(to: secretFile)
        let verifier = try TokenVerifier(configuration: AuthConfiguration(key: .secretFile(secretFile.path)))
        minter = try TokenMinter(secretFile: secretFile.path)
        try? FileManager.default.removeItem(at: secretFile)
        var logger = Logger(label: "in-process")
        logger.logLevel = .critical
        // The database's declared fields, as `serve` reads them at start.
        var cacheConfiguration = ProfileCacheConfiguration()
        cacheConfiguration.profileFields = database.profileFields
        let shared = ProfileCacheShared(configuration: cacheConfiguration)
        self.shared = shared
        responder = ProfileResponder(
            lifecycle: ServiceLifecycle(), authorization: authorization ?? .required(verifier, forReads: requireAuthForReads),
            liveUpdates: liveUpdates ? ProfileUpdateHub(streams: EventStreams(), logger: logger) : nil, logger: logger,
            parseCounts: parseCounts, profileFields: database.profileFields
        ) { [logger] _ in
            ProfileWorker(
                store: database.store(), cache: InMemoryBackends.cluster.client(), shared: shared,
                logger: logger)
        }
        worker = try responder.makeWorker(index: 0)
    }

    /// A token for `subject` (a profile id, or anything with `scope`), valid for an hour.
    public func token(for subject: Int64, scope: String? = nil) -> String {
        minter.token(subject: String(subject), scope: scope)
    }

    /// Answers `request` as a worker would.
    public func respond(to request: HTTPRequest) -> HTTPResponse {
        responder.respond(to: request, worker: worker)
    }

    public func request(
        _ method: HTTPMethod, _ target: String, headers: HTTPHeaders = [:], body: String? = nil
    ) -> HTTPResponse {
        respond(to: HTTPRequest(method: method, target: target, headers: headers, body: Array((body ?? "").utf8)))
    }

    public func get(_ id: Int64, query: String = "", headers: HTTPHeaders = [:]) -> HTTPResponse {
        request(.get, "/users/profile/\(id)\(query)", headers: headers)
    }

    /// `PUT` with `Content-Type: application/json` and, when given, the bearer token.
    public func put(_ id: Int64, _ body: String, token: String?, headers: HTTPHeaders = [:]) -> HTTPResponse {
        var headers = headers
        headers.add(name: "Content-Type", value: "application/json")
        if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
        return request(.put, "/users/profile/\(id)", headers: headers, body: body)
    }

    /// Creates profile `id` (its owner's token) and returns the answer.
    @discardableResult
    public func create(_ id: Int64, displayName: String = "First") -> HTTPResponse {
        put(id, #"{"username":"u\#(id % 1_000_000_000)","display_name":"\#(displayName)"}"#, token: token(for: id),
            headers: ["If-None-Match": "*"])
    }

    /// An id no other test uses.
    public static func newID() -> Int64 { Int64.random(in: 1_000_000_000...9_000_000_000_000_000) }
}

extension HTTPResponse {
    /// The body as text.
    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    /// The body as a JSON object, when it is one.
    public var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
    }

    /// The problem kind of an `application/problem+json` body (`type`'s last segment).
    public var problemKind: String? {
        (json?["type"] as? String)?.split(separator: ":").last.map(String.init)
    }
}
