import Foundation
import Synchronization

@testable import ProfileClient

/// An ``EventStreamTransport`` the test drives: it records each connection's request, and the
/// test hands the open connection reads (batches of events), or ends it.
final class ControlledEventTransport: EventStreamTransport {
    enum Step: Sendable {
        /// One read of the body: the events it completed, handed on as one batch.
        case read([ServerSentEvent])
        /// The service closes the stream.
        case close
        /// The service closes the stream after it sent `retry:` with this value.
        case closeWithRetryHint(Duration)
        /// The connection fails.
        case fail
        /// The connection cannot be made, for this reason (``TransportError/Kind/offline``…).
        case failBecause(TransportError.Kind)
        /// The service answers something else than 200.
        case refuse(TransportResponse)
    }

    private struct State {
        var requests: [TransportRequest] = []
        /// Connections open now, and the most open at once.
        var open = 0
        var mostOpen = 0
        /// Steps for connections not made yet, by index (0-based).
        var scripts: [Int: [Step]] = [:]
        var current: AsyncStream<Step>.Continuation?
    }

    private let state: Mutex<State>

    /// - Parameter scripts: the steps each of the first connections gets as soon as it opens.
    init(scripts: [[Step]] = []) {
        var state = State()
        for (index, script) in scripts.enumerated() { state.scripts[index] = script }
        self.state = Mutex(state)
    }

    var requests: [TransportRequest] { state.withLock { $0.requests } }
    /// The most connections that were open at once.
    var mostOpen: Int { state.withLock { $0.mostOpen } }
    /// The connections open now.
    var openNow: Int { state.withLock { $0.open } }

    /// Hands `step` to the connection opened last.
    func send(_ step: Step) {
        state.withLock { $0.current }?.yield(step)
    }

    /// Waits (up to 5 s) until `count` connections were opened; false if they were not.
    func waitForConnections(_ count: Int) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(5)
        while requests.count < count {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return true
    }

    func stream(_ request: TransportRequest, onEvents: @escaping @Sendable ([ServerSentEvent]) async -> Void)
        async throws(TransportError) -> EventStreamEnd
    {
        let (steps, continuation) = AsyncStream<Step>.makeStream()
        state.withLock { state in
            for step in state.scripts.removeValue(forKey: state.requests.count) ?? [] { continuation.yield(step) }
            state.requests.append(request)
            state.current = continuation
            state.open += 1
            state.mostOpen = max(state.mostOpen, state.open)
        }
        defer { state.withLock { $0.open -= 1 } }
        for await step in steps {
            switch step {
            case .read(let events): await onEvents(events)
            case .close: return .closed(retry: nil)
            case .closeWithRetryHint(let retry): return .closed(retry: retry)
            case .fail: throw TransportError(kind: .connection, description: "connection lost")
            case .failBecause(let kind): throw TransportError(kind: kind, description: "\(kind)")
            case .refuse(let response): return .refused(response)
            }
        }
        throw TransportError(kind: .cancelled, description: "cancelled")
    }

    static func profile(_ profile: Profile) -> ServerSentEvent {
        FakeEventTransport.event(profile)
    }

    static func deleted(_ id: Int64) -> ServerSentEvent {
        ServerSentEvent(event: "deleted", id: nil, data: #"{"id":\#(id)}"#)
    }
}

extension TransportRequest {
    /// The `ids=` members of a list stream's request (`42@3`: an id and its floor).
    var streamMembers: [String] {
        let query = URLComponents(url: url, resolvingAgainstBaseURL: true)?.queryItems?.first { $0.name == "ids" }
        return (query?.value ?? "").split(separator: ",").map(String.init)
    }

    /// The ids a list stream's request follows.
    var streamIDs: Set<Int64> {
        Set(streamMembers.compactMap { Int64($0.split(separator: "@")[0]) })
    }
}
