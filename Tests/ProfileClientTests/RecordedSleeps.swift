import Foundation
import Synchronization

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
        let deadline = ContinuousClock.now + .seconds(5)
        while waits.count < count {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return true
    }

    /// A client over `transport` and `events` whose waits land here, with jitter at its top
    /// (each backoff wait is its ceiling).
    func client(
        _ transport: FakeTransport = FakeTransport { _, _ throws(TransportError) in
            TransportResponse(status: 404, headers: [:], body: Data())
        },
        events: ControlledEventTransport, configure: (inout ProfileClientConfiguration) -> Void = { _ in }
    ) -> ProfileClient {
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.retry = RetryPolicy(maximumAttempts: 2, initialDelay: .milliseconds(1))
        configure(&configuration)
        return ProfileClient(
            configuration: configuration, transport: transport, eventTransport: events, randomUnit: { 1 },
            sleep: { try await self.sleep($0) })
    }
}

/// Reads an event stream in a task of its own and keeps every event it got.
final class EventRecorder: Sendable {
    private let log = Mutex<[ProfileEvent]>([])
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)

    init(_ stream: AsyncStream<ProfileEvent>) {
        let reader = Task { [weak self] in
            for await event in stream { self?.log.withLock { $0.append(event) } }
        }
        task.withLock { $0 = reader }
    }

    deinit { task.withLock { $0?.cancel() } }

    var events: [ProfileEvent] { log.withLock { $0 } }

    /// The profiles of the `updated` events.
    var profiles: [Profile] {
        events.compactMap { event in
            if case .updated(let profile) = event { return profile }
            return nil
        }
    }

    /// Waits (up to 5 s) until `done` holds for the events seen; false if it did not.
    func wait(until done: ([ProfileEvent]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(5)
        while !done(events) {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return true
    }
}
