import Foundation
import Glibc
import Testing

@testable import ProfileClient

/// ``URLSessionTransport`` against a loopback listener that accepts connections and never answers.
@Suite(.timeLimit(.minutes(1))) struct URLSessionTransportTests {
    /// A listening socket on a free loopback port; the kernel completes connections to it, and
    /// nobody ever reads or answers.
    final class SilentListener {
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
