public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// One HTTP request of the client, independent of URLSession: what an ``HTTPTransport`` sends.
public struct TransportRequest: Sendable, Hashable {
    public var method: String
    public var url: URL
    public var headers: [String: String]
    public var body: Data?
    public var timeout: Duration

    public init(method: String, url: URL, headers: [String: String], body: Data?, timeout: Duration) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// One HTTP answer; header names are lower-cased.
public struct TransportResponse: Sendable, Hashable {
    public var status: Int
    public var headers: [String: String]
    public var body: Data

    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// A request that got no HTTP answer, and why: the client retries and reports by ``kind``.
public struct TransportError: Error, Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// The request surely never reached the server (connection refused, host not found):
        /// safe to retry even for a write.
        case notSent
        /// The device has no network: nothing was sent. Reported as ``ProfileClientError/offline``.
        case offline
        /// The connection failed after the request may have reached the server (lost): a read
        /// may retry, a write may have been applied.
        case connection
        /// No answer in time: a read may retry, a write may have been applied.
        case timedOut
        /// The TLS handshake failed. Not retried.
        case tls
        /// The calling task was cancelled.
        case cancelled
        /// Anything else (a bad URL, an answer that is not HTTP).
        case other
    }

    public var kind: Kind
    public var description: String

    public init(kind: Kind, description: String) {
        self.kind = kind
        self.description = description
    }
}

/// Sends the client's requests: ``URLSessionTransport`` by default; an app's own for a shared or
/// pinned `URLSession`, a User-Agent, or tests and previews (`InMemoryProfileService`, in the `ProfileClientTesting` library).
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the service's answer, whatever its status.
    /// - Throws: ``TransportError`` when there is no answer.
    func send(_ request: TransportRequest) async throws(TransportError) -> TransportResponse
}

/// ``HTTPTransport`` over an ephemeral `URLSession` (FoundationNetworking's on Linux) with no
/// URL cache, so that every read reaches the service and the client's own cache alone decides.
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession
    /// Whether ``session`` is the transport's own (``init()``): only then does it invalidate it.
    private let ownsSession: Bool

    /// A session of its own: ephemeral, no URL cache, no cookies; invalidated with the transport.
    public convenience init() {
        self.init(session: URLSession(configuration: Self.ownConfiguration()), owned: true)
    }

    /// Sends through `session`: the app's own (shared, with certificate pinning in its delegate,
    /// or extra headers such as a User-Agent in its configuration). Give it no URL cache: the
    /// client's own store decides what is fresh. The session stays the app's: the transport never
    /// invalidates it.
    public convenience init(session: URLSession) {
        self.init(session: session, owned: false)
    }

    private init(session: URLSession, owned: Bool) {
        self.session = session
        self.ownsSession = owned
    }

    deinit {
        if ownsSession { session.finishTasksAndInvalidate() }
    }

    /// The configuration of a session the client makes itself: ephemeral, no URL cache, no cookies.
    static func ownConfiguration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpShouldSetCookies = false
        return configuration
    }

    public func send(_ request: TransportRequest) async throws(TransportError) -> TransportResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        let components = request.timeout.components
        urlRequest.timeoutInterval = Double(components.seconds) + Double(components.attoseconds) / 1e18
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        // Cancelling the calling task cancels the data task, so the connection is closed at once.
        let running = RunningTask()
        let outcome: Result<(Data, URLResponse), any Error> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                running.start(
                    session.dataTask(with: urlRequest) { data, response, error in
                        if let error {
                            continuation.resume(returning: .failure(error))
                        } else if let response {
                            continuation.resume(returning: .success((data ?? Data(), response)))
                        } else {
                            continuation.resume(returning: .failure(URLError(.badServerResponse)))
                        }
                    })
            }
        } onCancel: {
            running.cancel()
        }
        switch outcome {
        case .success(let (data, response)):
            guard let http = response as? HTTPURLResponse else {
                throw TransportError(kind: .other, description: "not an HTTP response")
            }
            var headers: [String: String] = [:]
            for name in ["cache-control", "content-type", "etag", "location", "retry-after"] {
                if let value = http.value(forHTTPHeaderField: name) { headers[name] = value }
            }
            return TransportResponse(status: http.statusCode, headers: headers, body: data)
        case .failure(let error):
            throw Self.classify(error)
        }
    }

    static func classify(_ error: any Error) -> TransportError {
        guard let urlError = error as? URLError else {
            return TransportError(kind: .other, description: String(describing: error))
        }
        let description = "URLError \(urlError.code.rawValue): \(urlError.localizedDescription)"
        switch urlError.code {
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed:
            return TransportError(kind: .notSent, description: description)
        case .notConnectedToInternet, .dataNotAllowed, .internationalRoamingOff, .callIsActive:
            return TransportError(kind: .offline, description: description)
        case .timedOut:
            return TransportError(kind: .timedOut, description: description)
        case .networkConnectionLost, .badServerResponse:
            return TransportError(kind: .connection, description: description)
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
            .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot, .clientCertificateRejected,
            .clientCertificateRequired:
            return TransportError(kind: .tls, description: description)
        case .cancelled:
            return TransportError(kind: .cancelled, description: description)
        default:
            return TransportError(kind: .other, description: description)
        }
    }
}

/// A data task and whether its caller was cancelled, whichever comes first.
///
/// `@unchecked Sendable`: `task` and `cancelled` are touched only under `lock`.
private final class RunningTask: @unchecked Sendable {
    private let lock = NSLock()
    private var task: URLSessionDataTask?
    private var cancelled = false

    /// Resumes `task`, or cancels it when the caller was cancelled before it existed.
    func start(_ task: URLSessionDataTask) {
        lock.lock()
        self.task = task
        let cancelled = self.cancelled
        lock.unlock()
        task.resume()
        if cancelled { task.cancel() }
    }

    func cancel() {
        lock.lock()
        cancelled = true
        let task = self.task
        lock.unlock()
        task?.cancel()
    }
}
