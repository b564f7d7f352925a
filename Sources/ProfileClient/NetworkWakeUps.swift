import Foundation

extension TransportError {
    /// Whether the network failed the request — no connection, or no answer in time — rather
    /// than anything about the request or the service.
    var isNetworkFailure: Bool {
        switch kind {
        case .offline, .notSent, .connection, .timedOut: true
        case .tls, .cancelled, .other: false
        }
    }
}

/// The event streams asleep in backoff because the network failed them (no HTTP answer at all),
/// and what wakes them: the network coming back — the app says so
/// (``ProfileClient/networkDidReturn()``, ``ProfileClient/resumeLiveUpdates()``), or any request
/// or stream of the client gets an answer again. A woken stream reconnects at once instead of
/// sleeping out a backoff that an outage made long. A stream the service refused (a 429 or 503
/// with `Retry-After`, say) sleeps without this, so the service's asked wait always holds.
final class NetworkWakeUps: Sendable {
    private struct State {
        var sleepers: [UInt64: AsyncStream<Void>.Continuation] = [:]
        var nextSleeper: UInt64 = 0
        /// Whether a request or stream found no network since the last answer.
        var networkFailed = false
    }

    private let state = LockedValue(State())

    /// Sleeps `duration` with `sleep`, or until woken.
    /// - Returns: false when the task was cancelled meanwhile.
    func sleep(_ duration: Duration, using sleep: @escaping @Sendable (Duration) async throws -> Void) async -> Bool {
        networkFailed()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await sleep(duration) }
            group.addTask { await self.untilWoken() }
            await group.next()
            group.cancelAll()
        }
        return !Task.isCancelled
    }

    /// A request or stream got no answer: the network is down for it.
    func networkFailed() {
        state.withLock { $0.networkFailed = true }
    }

    /// A request or stream got an answer: if the network had failed, it is back, and every
    /// sleeper wakes.
    func answered() {
        guard state.withLock({ state in defer { state.networkFailed = false }; return state.networkFailed }) else { return }
        wakeAll()
    }

    /// Wakes every sleeper (the app says the network is back).
    func wakeAll() {
        let sleepers = state.withLock { state in
            state.networkFailed = false
            defer { state.sleepers = [:] }
            return Array(state.sleepers.values)
        }
        for sleeper in sleepers { sleeper.finish() }
    }

    /// Returns when woken, or when the task is cancelled (an `AsyncStream` ends then).
    private func untilWoken() async {
        let (woken, sleeper) = AsyncStream<Void>.makeStream()
        let id = state.withLock { state in
            state.nextSleeper += 1
            state.sleepers[state.nextSleeper] = sleeper
            return state.nextSleeper
        }
        defer { state.withLock { _ = $0.sleepers.removeValue(forKey: id) } }
        for await _ in woken {}
    }
}
