import Foundation
import Synchronization

@testable import ProfileClient

/// An ``HTTPTransport`` that answers from a closure and records the requests it got.
final class FakeTransport: HTTPTransport {
    typealias Handler = @Sendable (TransportRequest, Int) async throws(TransportError) -> TransportResponse

    private let handler: Handler
    private let log = Mutex<[TransportRequest]>([])

    init(_ handler: @escaping Handler) {
        self.handler = handler
    }

    var requests: [TransportRequest] { log.withLock { $0 } }

    func send(_ request: TransportRequest) async throws(TransportError) -> TransportResponse {
        let index = log.withLock { log in
            log.append(request)
            return log.count
        }
        return try await handler(request, index)
    }

    /// A profile whose `updatedAt` differs per version, as the service's does.
    static func profile(_ id: Int64, _ name: String, version: Int32) -> Profile {
        Profile(id: id, username: "user\(id)", displayName: name, version: version, updatedAt: Date(timeIntervalSince1970: 1_767_225_600 + Double(version)))
    }

    static func json(_ profile: Profile, status: Int = 200) -> TransportResponse {
        TransportResponse(
            status: status, headers: ["content-type": "application/json"],
            body: try! JSONEncoder().encode(profile))
    }

    static func problem(
        _ status: Int, kind: String, field: String? = nil, current: Profile? = nil, headers: [String: String] = [:]
    ) -> TransportResponse {
        var object: [String: Any] = [
            "type": "tag:profile-service,2026:\(kind)", "title": "x", "status": status, "detail": kind,
        ]
        if let field { object["field"] = field }
        if let current {
            object["current"] = try! JSONSerialization.jsonObject(with: JSONEncoder().encode(current))
        }
        return TransportResponse(
            status: status, headers: headers.merging(["content-type": "application/problem+json"]) { $1 },
            body: try! JSONSerialization.data(withJSONObject: object))
    }

    /// A client over `transport` with fast retries and a clock the test moves.
    static func client(
        _ transport: FakeTransport, clock: ManualInstant = ManualInstant(), window: Duration = .seconds(10)
    ) -> ProfileClient {
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!)
        configuration.readYourWritesWindow = window
        configuration.retry = RetryPolicy(
            maximumAttempts: 4, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(4))
        return ProfileClient(configuration: configuration, transport: transport, now: { clock.now })
    }
}

/// A `ContinuousClock.Instant` that moves only when told.
final class ManualInstant: Sendable {
    private let offset = Mutex<Duration>(.zero)
    private let start = ContinuousClock.now

    var now: ContinuousClock.Instant { start + offset.withLock { $0 } }

    func advance(by duration: Duration) { offset.withLock { $0 += duration } }
}

/// A one-shot signal a fake answer can wait for.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// What the store learns, as tests hand it in: in the store's current generation.
extension LocalProfileCache {
    @discardableResult
    func didFetch(_ profile: Profile) -> Profile { didFetch(profile, since: generation) }
    func didReceiveEvent(_ profile: Profile) { didReceiveEvent(profile, since: generation) }
    func didReceiveEvents(_ events: [ProfileStreamEvent]) { didReceiveEvents(events, since: generation) }
    func didLearnMissing(id: Int64) { didLearnMissing(id: id, since: generation) }
    @discardableResult
    func didWrite(_ profile: Profile) -> Profile { didWrite(profile, since: generation) }
}
