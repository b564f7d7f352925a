import Foundation
import Synchronization
import TestSupport

@testable import ProfileClient

/// The client's waits (backoff, `retry:`, `Retry-After`), recorded and cut to a millisecond, so
/// a test reads how long the client would have waited without waiting.
final class RecordedSleeps: Sendable {
    private let log = Mutex<[Duration]>([])

    var waits: [Duration] { log.withLock { $0 } }

    func sleep(_ duration: Duration) async throws {
        log.withLock { $0.append(duration) }
        try await Task.sleep(for: .milliseconds(1))
    }

    /// Waits (up to 5 s) until `count` waits were recorded; false if they were not.
    func waitForWaits(_ count: Int) async -> Bool {
        await Eventually.waitAsync(timeout: .seconds(5), interval: .milliseconds(2)) { waits.count >= count }
    }

    /// A client over `transport` and `events` whose waits land here, with jitter at its top
    /// (each backoff wait is its ceiling).
    func client(
        _ transport: FakeTransport = FakeTransport { _, _ throws(TransportError) in
            TransportResponse(status: 404, headers: [:], body: Data())
        },
        events: ControlledEventTransport, settleDelay: Duration? = FollowedStreams.settleDelay,
        configure: (inout ProfileClientConfiguration) -> Void = { _ in }
    ) -> ProfileClient {
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.retry = RetryPolicy(maximumAttempts: 2, initialDelay: .milliseconds(1))
        configure(&configuration)
        return ProfileClient(
            configuration: configuration, transport: transport, eventTransport: events, randomUnit: { 1 },
            sleep: { try await self.sleep($0) }, settleDelay: settleDelay)
    }
}

/// What a test saw of ``ProfileClient/events(for:)``.
typealias EventRecorder = StreamRecorder<ProfileEvent>

extension StreamRecorder where Element == ProfileEvent {
    var events: [ProfileEvent] { elements }

    /// The profiles of the `updated` events.
    var profiles: [Profile] {
        elements.compactMap { event in
            if case .updated(let profile) = event { return profile }
            return nil
        }
    }
}
