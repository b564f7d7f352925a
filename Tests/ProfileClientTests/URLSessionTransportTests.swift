import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Glibc
import Synchronization
import Testing

@testable import ProfileClient

/// ``URLSessionTransport`` and ``URLSessionEventStreamTransport`` against loopback listeners: one
/// that accepts connections and never answers, one that answers a single request.
@Suite(.timeLimit(.minutes(1))) struct URLSessionTransportTests {
    /// A listening socket on a free loopback port; the kernel completes connections to it, and
    /// nobody ever reads or answers.
    final class SilentListener: Sendable {
        let descriptor: Int32
        let port: Int

        init() throws {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.descriptor = descriptor
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, length) == 0 && listen(descriptor, 16) == 0
                        && getsockname(descriptor, $0, &length) == 0
                }
            }
            try #require(bound)
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        deinit { close(descriptor) }
    }

    /// A listener that answers one request with `response` (raw HTTP/1.1) on a thread of its own
    /// and keeps the request's head.
    final class OneAnswerServer: Sendable {
        let port: Int
        private let head = LockedValue<String?>(nil)
        private let answered = Gate()

        init(response: String) throws {
            let listener = try SilentListener()
            port = listener.port
            let thread = Thread { [head, answered] in
                let connection = accept(listener.descriptor, nil, nil)
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4_096)
                while !received.suffix(4).elementsEqual("\r\n\r\n".utf8) {
                    let count = read(connection, &buffer, buffer.count)
                    if count <= 0 { break }
                    received += buffer[..<count]
                }
                head.withLock { $0 = String(decoding: received, as: UTF8.self) }
                let bytes = Array(response.utf8)
                _ = bytes.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                close(connection)
                withExtendedLifetime(listener) {}
                answered.open()
            }
            thread.start()
        }

        /// The head of the request it answered, once it answered.
        func requestHead() async -> String {
            await answered.wait()
            return head.withLock { $0 ?? "" }
        }
    }

    /// Records whether its session was invalidated.
    final class InvalidationRecorder: NSObject, URLSessionDelegate, Sendable {
        private let invalidated = Mutex(false)
        var wasInvalidated: Bool { invalidated.withLock { $0 } }

        func urlSession(_ session: URLSession, didBecomeInvalidWithError error: (any Error)?) {
            invalidated.withLock { $0 = true }
        }
    }

    @Test func releasingATransportLeavesTheAppsSessionUsable() async throws {
        let recorder = InvalidationRecorder()
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let session = URLSession(configuration: .ephemeral, delegate: recorder, delegateQueue: queue)
        defer { session.invalidateAndCancel() }
        do {
            let transport = URLSessionTransport(session: session)
            _ = transport
        }
        // Listing the tasks passes through the session's work queue and then its serial delegate
        // queue, behind an invalidation's callback had there been one.
        await withCheckedContinuation { continuation in
            session.getTasksWithCompletionHandler { _, _, _ in continuation.resume() }
        }
        #expect(!recorder.wasInvalidated, "the app's session is the app's: the transport never invalidates it")
    }

    @Test func eventStreamsGoThroughTheAppsSessionConfiguration() async throws {
        let server = try OneAnswerServer(
            response: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                + "id: 1\nevent: profile\ndata: {}\n\n")
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["User-Agent": "ProfileApp/7"]
        let session = URLSession(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let transport = URLSessionEventStreamTransport(session: session)
        let request = TransportRequest(
            method: "GET", url: URL(string: "http://127.0.0.1:\(server.port)/users/profile/1/events")!,
            headers: ["Accept": "text/event-stream"], body: nil, timeout: .seconds(20))
        let delivered = Mutex<[ServerSentEvent]>([])
        let end = try await transport.stream(request) { events in delivered.withLock { $0 += events } }
        #expect(end == .closed(retry: nil))
        #expect(delivered.withLock { $0.map(\.id) } == ["1"])
        let head = await server.requestHead().lowercased()
        #expect(head.contains("user-agent: profileapp/7"), "the app's User-Agent: \(head)")
    }

    @Test func cancellingTheCallerCancelsTheRequestAtOnce() async throws {
        let listener = try SilentListener()
        let request = TransportRequest(
            method: "GET", url: URL(string: "http://127.0.0.1:\(listener.port)/users/profile/1")!, headers: [:],
            body: nil, timeout: .seconds(20))
        let call = Task { try await URLSessionTransport().send(request) }
        try await Task.sleep(for: .milliseconds(200))
        let cancelled = ContinuousClock.now
        call.cancel()
        await #expect(throws: TransportError.self) { try await call.value }
        let waited = ContinuousClock.now - cancelled
        #expect(waited < .seconds(2), "the data task was cancelled, not left to its 20 s timeout: \(waited)")
    }

    @Test func cancellingAFetchCancelsItsRequest() async throws {
        let listener = try SilentListener()
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://127.0.0.1:\(listener.port)")!)
        configuration.requestTimeout = .seconds(20)
        configuration.retry = RetryPolicy(maximumAttempts: 1)
        configuration.followsLiveUpdates = false
        let client = ProfileClient(configuration: configuration)
        let read = Task { try await client.fetch(id: 1) }
        try await Task.sleep(for: .milliseconds(200))
        let cancelled = ContinuousClock.now
        read.cancel()
        await #expect(throws: ProfileClientError.self) { try await read.value }
        #expect(ContinuousClock.now - cancelled < .seconds(2), "the shared read had no other caller: it was cancelled")
    }
}
