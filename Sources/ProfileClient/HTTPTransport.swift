import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP request of the client, independent of URLSession (so tests can fake the network).
struct TransportRequest: Sendable, Hashable {
    var method: String
    var url: URL
    var headers: [String: String]
    var body: Data?
    var timeout: Duration
}

/// One HTTP answer; header names are lower-cased.
struct TransportResponse: Sendable, Hashable {
    var status: Int
    var headers: [String: String]
    var body: Data
}

/// A request that got no HTTP answer.
struct TransportError: Error, Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        /// The request surely never reached the server (connection refused, host not found):
        /// safe to retry even for a write.
        case notSent
        /// The connection failed at some point (lost, timed out): a read may retry, a write may
        /// have been applied.
        case connection
        /// Anything else (cancelled, bad URL, a token provider that threw).
        case other
    }

    var kind: Kind
    var description: String
}

/// Sends requests; ``URLSessionTransport`` in production, fakes in unit tests.
protocol HTTPTransport: Sendable {
    func send(_ request: TransportRequest) async throws(TransportError) -> TransportResponse
}

/// ``HTTPTransport`` over an ephemeral `URLSession` (FoundationNetworking's on Linux) with no
/// URL cache, so that every read reaches the service and the client's own cache alone decides.
final class URLSessionTransport: HTTPTransport {
    private let session: URLSession

    init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpShouldSetCookies = false
        session = URLSession(configuration: configuration)
    }

    deinit {
        session.finishTasksAndInvalidate()
    }

    func send(_ request: TransportRequest) async throws(TransportError) -> TransportResponse {
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
            for name in ["content-type", "etag", "location", "retry-after"] {
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
        case .networkConnectionLost, .timedOut, .notConnectedToInternet, .badServerResponse,
            .secureConnectionFailed:
            return TransportError(kind: .connection, description: description)
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
