import Foundation

extension ProfileClient {
    /// One request with the retry policy: reads on 503/504 and connection errors, writes only on
    /// errors that prove the request never left (``TransportError/Kind/notSent``). A read shares
    /// the answer of an identical one in flight (``InFlightReads``) begun since the last
    /// ``clear()``: one begun before is the previous session's.
    func send(
        method: String, path: String, body: Data?, isRead: Bool, headers extra: [String: String] = [:]
    ) async throws(ProfileClientError) -> TransportResponse {
        guard isRead, body == nil else {
            return try await sendWithRetries(method: method, path: path, body: body, isRead: isRead, headers: extra)
        }
        let generation = await cache.generation
        let fields = extra.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        let key = ([method, path, "generation \(generation)"] + fields).joined(separator: "\n")
        return try await inFlightReads.answer(for: key) { [self] in
            do throws(ProfileClientError) {
                return .success(try await sendWithRetries(method: method, path: path, body: nil, isRead: true, headers: extra))
            } catch {
                return .failure(error)
            }
        }.get()
    }

    private func sendWithRetries(
        method: String, path: String, body: Data?, isRead: Bool, headers extra: [String: String]
    ) async throws(ProfileClientError) -> TransportResponse {
        guard let url = URL(string: path, relativeTo: configuration.baseURL)?.absoluteURL else {
            throw .transport("cannot form a URL from \(configuration.baseURL) and \(path)")
        }
        var attempt = 0
        var rejected: String?  // the token a 401 refused: the next attempt asks for a fresh one
        var refreshedToken = false
        while true {
            attempt += 1
            var headers = extra
            headers["Accept"] = "application/json, application/problem+json"
            if body != nil, headers["Content-Type"] == nil { headers["Content-Type"] = "application/json" }
            let token = try await tokens.token(replacing: rejected)
            if let token { headers["Authorization"] = "Bearer \(token)" }
            let request = TransportRequest(
                method: method, url: url, headers: headers, body: body, timeout: configuration.requestTimeout)
            let wait: Duration?
            do {
                let response = try await transport.send(request)
                networkWakeUps.answered()
                if response.status == 401, let token, !refreshedToken {
                    // Refused before anything was applied: once more with a fresh token.
                    (rejected, refreshedToken) = (token, true)
                    continue
                }
                rejected = nil
                let ownerViews = PrivateAnswers.ownerViewIDs(in: response, token: token)
                if !ownerViews.isEmpty { await cache.didReceiveOwnerViews(of: ownerViews) }
                guard isRead, Self.retriedStatuses.contains(response.status) else { return response }
                let retryAfter = response.headers["retry-after"].flatMap { RetryPolicy.parseRetryAfter($0) }
                wait = configuration.retry.delay(afterAttempt: attempt, retryAfter: retryAfter, randomUnit: randomUnit())
                if wait == nil { return response }
            } catch {
                if error.isNetworkFailure { networkWakeUps.networkFailed() }
                let retryable =
                    error.kind == .notSent || (isRead && (error.kind == .connection || error.kind == .timedOut))
                wait = retryable && !Task.isCancelled
                    ? configuration.retry.delay(afterAttempt: attempt, retryAfter: nil, randomUnit: randomUnit()) : nil
                if wait == nil { throw Task.isCancelled ? .cancelled : Self.error(for: error) }
            }
            do {
                try await sleep(wait!)
            } catch {
                throw .cancelled
            }
        }
    }

    /// What reads retry (with backoff, honouring `Retry-After`): a gateway's 502 and a 500 while
    /// an instance restarts, and the service's own 503 and 504. A read changes nothing.
    static let retriedStatuses: Set<Int> = [500, 502, 503, 504]

    /// The ``ProfileClientError`` of a request that got no answer.
    static func error(for error: TransportError) -> ProfileClientError {
        switch error.kind {
        case .offline: .offline
        case .timedOut: .timedOut
        case .tls: .tls(error.description)
        case .cancelled: .cancelled
        case .notSent, .connection, .other: .transport(error.description)
        }
    }

    /// The ``ProfileClientError`` of an answer that is not a success.
    static func error(for response: TransportResponse) -> ProfileClientError {
        let problem = try? JSONDecoder().decode(ProblemDocument.self, from: response.body)
        let detail = problem?.detail ?? "HTTP \(response.status)"
        switch response.status {
        case 404: return .notFound
        case 401: return .unauthorized
        case 403: return .forbidden
        case 409:
            if let current = problem?.current { return .conflict(current: current) }
            if problem?.type?.hasSuffix("username-taken") == true { return .usernameTaken }
            return .validation(field: problem?.field, detail: detail)
        case 400, 412, 413, 415, 422, 428: return .validation(field: problem?.field, detail: detail)
        case 429: return .rateLimited(retryAfter: retryAfter(response))
        case 503, 504: return .unavailable(retryAfter: retryAfter(response))
        case 500...599: return .serverError(status: response.status, retryAfter: retryAfter(response), detail: problem?.detail)
        default: return .unexpectedStatus(response.status, detail: problem?.detail)
        }
    }

    private static func retryAfter(_ response: TransportResponse) -> Duration? {
        response.headers["retry-after"].flatMap { RetryPolicy.parseRetryAfter($0) }
    }

    static func decodeProfile(_ body: Data) throws(ProfileClientError) -> Profile {
        try decode(Profile.self, from: body, what: "a profile")
    }

    /// `body` as `type`; a failure names the member at fault (``ProfileClientError/decoding(field:detail:)``).
    static func decode<Value: Decodable>(_ type: Value.Type, from body: Data, what: String) throws(ProfileClientError) -> Value {
        do {
            return try JSONDecoder().decode(type, from: body)
        } catch let error as DecodingError {
            throw .decoding(field: error.field, detail: "the service answered \(what) that does not decode: \(error)")
        } catch {
            throw .decoding(field: nil, detail: "the service answered \(what) that does not decode: \(error)")
        }
    }

    /// A merge patch's body: each member set, `nil` as `null` (unset).
    static func encode(patch members: [String: String?]) throws(ProfileClientError) -> Data {
        let object = members.mapValues { value -> Any in value ?? NSNull() }
        do {
            return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        } catch {
            throw .validation(field: nil, detail: "cannot encode the request: \(error)")
        }
    }

    static func encode(_ fields: [String: String], version: Int32? = nil) throws(ProfileClientError) -> Data {
        struct Body: Encodable {
            var fields: [String: String]
            var version: Int32?

            func encode(to encoder: any Encoder) throws {
                struct Key: CodingKey {
                    var stringValue: String
                    var intValue: Int? { nil }
                    init(stringValue: String) { self.stringValue = stringValue }
                    init?(intValue: Int) { nil }
                }
                var container = encoder.container(keyedBy: Key.self)
                for (name, value) in fields { try container.encode(value, forKey: Key(stringValue: name)) }
                if let version { try container.encode(version, forKey: Key(stringValue: "version")) }
            }
        }
        do {
            return try JSONEncoder().encode(Body(fields: fields, version: version))
        } catch {
            throw .validation(field: nil, detail: "cannot encode the request: \(error)")
        }
    }
}

/// The fields of an RFC 9457 problem document that the client acts on.
struct ProblemDocument: Decodable {
    var type: String?
    var status: Int?
    var detail: String?
    var field: String?
    var current: Profile?
}

extension DecodingError {
    /// The JSON member at fault, as a dotted path (`profiles.2.version`); nil for the whole document.
    var field: String? {
        let path: [any CodingKey]
        switch self {
        case .keyNotFound(let key, let context): path = context.codingPath + [key]
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            path = context.codingPath
        @unknown default: return nil
        }
        guard !path.isEmpty else { return nil }
        return path.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
    }
}
