import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a stream attempt ended without a transport error.
enum EventStreamEnd: Sendable, Hashable {
    /// The service answered 200 and later closed the stream (a drain, a cut): reconnect.
    case closed
    /// The service answered something else; the body is its problem document.
    case refused(TransportResponse)
}

/// Opens event streams (`text/event-stream`); ``URLSessionEventStreamTransport`` in production.
protocol EventStreamTransport: Sendable {
    /// Opens `request` and calls `onEvent` for each event until the stream ends.
    /// - Throws: ``TransportError`` when the connection fails or is never made.
    func stream(_ request: TransportRequest, onEvent: @escaping @Sendable (ServerSentEvent) async -> Void)
        async throws(TransportError) -> EventStreamEnd
}

/// ``EventStreamTransport`` over a `URLSession` data task whose delegate receives the body as it
/// arrives (FoundationNetworking's on Linux). `requestTimeout` is the longest silence allowed,
/// so keep it above the service's heartbeat interval.
final class URLSessionEventStreamTransport: EventStreamTransport {
    func stream(_ request: TransportRequest, onEvent: @escaping @Sendable (ServerSentEvent) async -> Void)
        async throws(TransportError) -> EventStreamEnd
    {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        let components = request.timeout.components
        urlRequest.timeoutInterval = Double(components.seconds) + Double(components.attoseconds) / 1e18
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }

        let (chunks, continuation) = AsyncStream<Chunk>.makeStream()
        let delegate = StreamDelegate(continuation: continuation)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        let task = session.dataTask(with: urlRequest)
        defer {
            task.cancel()
            session.invalidateAndCancel()
        }
        task.resume()

        var parser = ServerSentEventParser()
        var status = 0
        var headers: [String: String] = [:]
        var body = Data()
        var failure: TransportError?
        await withTaskCancellationHandler {
            for await chunk in chunks {
                switch chunk {
                case .response(let code, let fields):
                    status = code
                    headers = fields
                case .data(let data):
                    if status == 200 {
                        for event in parser.feed(data) { await onEvent(event) }
                    } else {
                        body.append(data)
                    }
                case .finished(let error):
                    if let error, status == 0 || status == 200 {
                        if (error as? URLError)?.code == .cancelled { return }
                        failure = URLSessionTransport.classify(error)
                    }
                    return
                }
            }
        } onCancel: {
            task.cancel()
        }
        if let failure { throw failure }
        if Task.isCancelled { throw TransportError(kind: .other, description: "cancelled") }
        guard status == 200 else {
            return .refused(TransportResponse(status: status, headers: headers, body: body))
        }
        return .closed
    }

    private enum Chunk: Sendable {
        case response(status: Int, headers: [String: String])
        case data(Data)
        case finished((any Error)?)
    }

    /// Forwards the task's callbacks to the stream.
    private final class StreamDelegate: NSObject, URLSessionDataDelegate, Sendable {
        let continuation: AsyncStream<Chunk>.Continuation

        init(continuation: AsyncStream<Chunk>.Continuation) {
            self.continuation = continuation
        }

        func urlSession(
            _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
        ) {
            let http = response as? HTTPURLResponse
            var headers: [String: String] = [:]
            for name in ["content-type", "retry-after"] {
                if let value = http?.value(forHTTPHeaderField: name) { headers[name] = value }
            }
            continuation.yield(.response(status: http?.statusCode ?? 0, headers: headers))
            completionHandler(.allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            continuation.yield(.data(data))
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            continuation.yield(.finished(error))
            continuation.finish()
        }
    }
}
