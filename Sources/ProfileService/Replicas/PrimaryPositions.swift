import Dispatch
import PostgresClient
import ServiceRuntime
import Synchronization

/// The primary's WAL position as the standby reads of this process need it: taken after an
/// instant (a read's start, a lease), shared by every read that began before it was taken
/// (docs/design.md §8).
///
/// A read that needs a position joins the sample under way if that sample began after the
/// read did; otherwise it waits for that sample to end and joins or leads the next. The leader
/// samples with its own primary connection, so under a flush storm one `SELECT
/// pg_current_wal_flush_lsn()` answers every miss that arrived while the previous one ran.
final class PrimaryPositions: Sendable {
    private struct Sample {
        var position: LSN
        var startedAt: ContinuousClock.Instant
    }

    private struct State {
        var latest: Sample?
        var samplingSince: ContinuousClock.Instant?
        var waiters: [DispatchSemaphore] = []
    }

    private let state = Mutex(State())

    init() {}

    private enum Step {
        case use(LSN)
        case lead(ContinuousClock.Instant)
        case wait(DispatchSemaphore)
    }

    /// A position of the primary read after `instant`, or `nil` when none could be had within
    /// `timeout` (the primary failed or is slow: the read then goes to the primary itself).
    /// - Parameter sample: reads the position with the caller's own connection, if it leads.
    func position(
        after instant: ContinuousClock.Instant, timeout: Duration, sample: () throws(ProfileStoreError) -> LSN
    ) -> LSN? {
        let deadline = ContinuousClock.now + timeout
        // Each round either answers, leads, or waits for a sample to end; three are enough for
        // a sample that began before `instant` and the one after it.
        for _ in 0..<3 {
            let step: Step = state.withLock { state in
                if let latest = state.latest, latest.startedAt >= instant { return .use(latest.position) }
                if state.samplingSince != nil {
                    let waiter = DispatchSemaphore(value: 0)
                    state.waiters.append(waiter)
                    return .wait(waiter)
                }
                let now = ContinuousClock.now
                state.samplingSince = now
                return .lead(now)
            }
            switch step {
            case .use(let position):
                return position
            case .lead(let startedAt):
                let position = try? sample()
                let waiters = state.withLock { state in
                    if let position, (state.latest?.startedAt).map({ $0 < startedAt }) ?? true {
                        state.latest = Sample(position: position, startedAt: startedAt)
                    }
                    state.samplingSince = nil
                    defer { state.waiters = [] }
                    return state.waiters
                }
                for waiter in waiters { waiter.signal() }
                return position
            case .wait(let waiter):
                let remaining = ContinuousClock.now.duration(to: deadline)
                guard remaining > .zero, waiter.wait(timeout: .after(remaining)) == .success else { return nil }
            }
        }
        return nil
    }
}
