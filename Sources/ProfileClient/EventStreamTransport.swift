#if canImport(FoundationNetworking)
import Foundation
public import FoundationNetworking
#else
public import Foundation
#endif

/// How a stream attempt ended without a transport error.
public enum EventStreamEnd: Sendable, Hashable {
    /// The service answered 200 and later closed the stream (a drain, a cut): reconnect, after
    /// `retry` when the stream gave a `retry:` hint.
    case closed(retry: Duration?)
    /// The service answered something else; the body is its problem document.
    case refused(TransportResponse)
}

/// Opens event streams (`text/event-stream`); ``URLSessionEventStreamTransport`` by default.
public protocol EventStreamTransport: Sendable {
    /// Opens `request` and calls `onEvents` until the stream ends: once with no events when the
    /// service accepted the stream (200), then with every event the body completed since the last
    /// call (never empty): a burst that arrived together, or while the previous call ran, comes as
    /// one batch.
    /// - Throws: ``TransportError`` when the connection fails or is never made.
    func stream(_ request: TransportRequest, onEvents: @escaping @Sendable ([ServerSentEvent]) async -> Void)
        async throws(TransportError) -> EventStreamEnd
}

/// ``EventStreamTransport`` over a `URLSession` data task whose delegate receives the body as it
/// arrives (FoundationNetworking's on Linux). `requestTimeout` is the longest silence allowed,
/// so keep it above the service's heartbeat interval.
public final class URLSessionEventStreamTransport: EventStreamTransport {
    /// The app's session, if it gave one.
    private let session: URLSession?

    /// Each stream in an ephemeral session of its own, with no URL cache and no cookies.
    public init() {
        session = nil
    }

    /// Opens the streams through `session`, the app's — the one its ``URLSessionTransport``
    /// sends through — so that what it configured applies to them too: a User-Agent and other
    /// headers, Low Data Mode and cellular access, proxies, and on Apple platforms its delegate
    /// (certificate pinning). The transport never invalidates it. FoundationNetworking (Linux)
    /// gives a task's body to its session's delegate only, so there each stream has a session
    /// of its own made with `session`'s configuration.
    public init(session: URLSession) {
        self.session = session
    }

    public func stream(_ request: TransportRequest, onEvents: @escaping @Sendable ([ServerSentEvent]) async -> Void)
        async throws(TransportError) -> EventStreamEnd
    {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        let components = request.timeout.components
        urlRequest.timeoutInterval = Double(components.seconds) + Double(components.attoseconds) / 1e18
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }

        let inbox = Inbox()
        let (task, ownSession) = dataTask(urlRequest, delegate: StreamDelegate(inbox: inbox))
        defer {
            task.cancel()
            ownSession?.invalidateAndCancel()
        }
        task.resume()

        var parser = ServerSentEventParser()
        var status = 0
        var headers: [String: String] = [:]
        var body = Data()
        var failure: TransportError?
        var announced = false  // the empty batch that says the stream opened
        await withTaskCancellationHandler {
            for await _ in inbox.arrivals {
                // Everything buffered since the last turn, so a burst is handed on as one batch.
                var events: [ServerSentEvent] = []
                var finished = false
                for chunk in inbox.takeAll() {
                    switch chunk {
                    case .response(let code, let fields):
                        status = code
                        headers = fields
                    case .data(let data):
                        if status == 200 { events += parser.feed(data) } else { body.append(data) }
                    case .finished(let error):
                        if let error, status == 0 || status == 200, (error as? URLError)?.code != .cancelled {
                            failure = URLSessionTransport.classify(error)
                        }
                        finished = true
                    }
                }
                if !events.isEmpty || (status == 200 && !announced) {
                    announced = true
                    await onEvents(events)
                }
                if finished { return }
            }
        } onCancel: {
            task.cancel()
        }
        if let failure { throw failure }
        if Task.isCancelled { throw TransportError(kind: .cancelled, description: "cancelled") }
        guard status == 200 else {
            return .refused(TransportResponse(status: status, headers: headers, body: body))
        }
        return .closed(retry: parser.retryMilliseconds.map { .milliseconds($0) })
    }

    /// A data task of `request` whose body goes to `delegate`, and the session made for it, if
    /// one was (invalidated when the stream ends); the app's session is never.
    private func dataTask(_ request: URLRequest, delegate: StreamDelegate) -> (URLSessionDataTask, URLSession?) {
        #if !canImport(FoundationNetworking)
        if let session {
            let task = session.dataTask(with: request)
            task.delegate = delegate  // the session's delegate still answers its challenges
            return (task, nil)
        }
        #endif
        let session = URLSession(
            configuration: session?.configuration ?? URLSessionTransport.ownConfiguration(), delegate: delegate,
            delegateQueue: nil)
        return (session.dataTask(with: request), session)
    }

    private enum Chunk: Sendable {
        case response(status: Int, headers: [String: String])
        case data(Data)
        case finished((any Error)?)
    }

    /// What the task delivered and the reader has not taken yet; `arrivals` wakes the reader
    /// (one pending wake-up stands for any number of chunks).
    private final class Inbox: Sendable {
        let arrivals: AsyncStream<Void>
        private let wake: AsyncStream<Void>.Continuation
        private let chunks = LockedValue<[Chunk]>([])

        init() {
            (arrivals, wake) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        }

        func put(_ chunk: Chunk) {
            chunks.withLock { $0.append(chunk) }
            wake.yield()
        }

        func takeAll() -> [Chunk] {
            chunks.withLock { chunks in
                defer { chunks = [] }
                return chunks
            }
        }

        func finish() {
            wake.finish()
        }
    }

    /// Forwards the task's callbacks to the inbox.
    private final class StreamDelegate: NSObject, URLSessionDataDelegate, Sendable {
        let inbox: Inbox

        init(inbox: Inbox) {
            self.inbox = inbox
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
            inbox.put(.response(status: http?.statusCode ?? 0, headers: headers))
            completionHandler(.allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            inbox.put(.data(data))
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            inbox.put(.finished(error))
            inbox.finish()
        }
    }
}
