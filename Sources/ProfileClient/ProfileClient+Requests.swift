import Foundation

extension ProfileClient {
    /// One request with the retry policy: reads on 503/504 and connection errors, writes only on
    /// errors that prove the request never left (``TransportError/Kind/notSent``). A read shares
    /// the answer of an identical one in flight (``InFlightReads``).
    func send(
        method: String, path: String, body: Data?, isRead: Bool, headers extra: [String: String] = [:]
    ) async throws(ProfileClientError) -> TransportResponse {
        guard isRead, body == nil else {
            return try await sendWithRetries(method: method, path: path, body: body, isRead: isRead, headers: extra)
        }
        let key = ([method, path] + extra.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" })
            .joined(separator: "\n")
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
            if body != nil { headers["Content-Type"] = "application/json" }
            let token = try await configuration.bearerToken(replacing: rejected)
            if let token { headers["Authorization"] = "Bearer \(token)" }
            let request = TransportRequest(
                method: method, url: url, headers: headers, body: body, timeout: configuration.requestTimeout)
            let wait: Duration?
            do {
                let response = try await transport.send(request)
                if response.status == 401, let token, !refreshedToken {
                    // Refused before anything was applied: once more with a fresh token.
                    (rejected, refreshedToken) = (token, true)
                    continue
                }
                rejected = nil
                guard isRead, response.status == 503 || response.status == 504 else { return response }
                let retryAfter = response.headers["retry-after"].flatMap { RetryPolicy.parseRetryAfter($0) }
                wait = configuration.retry.delay(afterAttempt: attempt, retryAfter: retryAfter, randomUnit: randomUnit())
                if wait == nil { return response }
            } catch {
                let retryable = error.kind == .notSent || (isRead && error.kind == .connection)
                wait = retryable
                    ? configuration.retry.delay(afterAttempt: attempt, retryAfter: nil, randomUnit: randomUnit()) : nil
                if wait == nil { throw .transport(error.description) }
            }
            do {
                try await sleep(wait!)
            } catch {
                throw .transport("cancelled")
            }
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
            return .validation(field: problem?.field, detail: detail)
        case 400, 412, 413, 415, 422, 428: return .validation(field: problem?.field, detail: detail)
        case 503, 504:
            return .unavailable(retryAfter: response.headers["retry-after"].flatMap { RetryPolicy.parseRetryAfter($0) })
        default: return .unexpectedStatus(response.status, detail: problem?.detail)
        }
    }

    static func decodeProfile(_ body: Data) throws(ProfileClientError) -> Profile {
        do {
            return try JSONDecoder().decode(Profile.self, from: body)
        } catch {
            throw .transport("the service answered a profile that does not decode: \(error)")
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
            throw .transport("cannot encode the request: \(error)")
        }
    }
}

extension ProfileClientConfiguration {
    /// The token of the next attempt, from ``tokenProvider``; after a 401, `rejected` is the token
    /// the service refused, handed to ``tokenRejected`` first so the provider returns a fresh one.
    /// - Throws: ``ProfileClientError/tokenUnavailable(_:)`` when the provider throws.
    func bearerToken(replacing rejected: String?) async throws(ProfileClientError) -> String? {
        guard let tokenProvider else { return nil }
        if let rejected { await tokenRejected?(rejected) }
        do {
            return try await tokenProvider()
        } catch {
            throw .tokenUnavailable(String(describing: error))
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
