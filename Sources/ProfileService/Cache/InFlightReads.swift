import Dispatch
import ServiceRuntime
import Synchronization

/// Shares one PostgreSQL read among concurrent misses of one id in this process.
///
/// A follower whose read began before the leader's read did may use its result as is: the read
/// began after the follower's request arrived, so it sees every write acknowledged before then
/// (and answers any floor the client can hold). A follower that arrived later uses it only if the
/// leader's populate landed, which proves no write-through touched the key since the lease was
/// taken, and so no acknowledged write is newer than the row; otherwise it reads for itself.
/// That proof covers only followers that joined before the populate was sent, so the leader
/// closes its flight to new followers first (``close(_:flight:)``; docs/design.md §2.1).
/// A follower also checks the row against its own `min_version`.
final class InFlightReads: Sendable {
    enum Outcome: Sendable {
        case found(Profile, populated: Bool)
        case notFound
        case failed(ProfileStoreError)
    }

    enum Role {
        case leader(Flight)
        case follower(Flight)
    }

    /// What a follower's wait for the leader ended with.
    enum Wait {
        /// The leader's outcome, which this follower may use; `readAfterJoin` when the leader's
        /// read began after the follower's read did, so it answers the follower's own floor too.
        case usable(Outcome, readAfterJoin: Bool)
        /// The leader finished, but its row may predate this follower's request: read it yourself.
        case unusable
        /// The leader did not finish within the bound (docs/design.md §5).
        case timedOut
        /// Every waiting slot was taken: no wait at all.
        case refused
    }

    final class Flight: Sendable {
        private struct State {
            var readStartedAt: ContinuousClock.Instant?
            var outcome: Outcome?
            var waiters: [DispatchSemaphore] = []
        }

        private let state = Mutex(State())

        func markReadStarted() {
            let now = ContinuousClock.now
            state.withLock { $0.readStartedAt = now }
        }

        fileprivate func finish(_ outcome: Outcome) {
            let waiters = state.withLock { state in
                state.outcome = outcome
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.signal() }
        }

        /// Waits for the leader, at most `timeout`, in one of `slots` (none needed when the
        /// leader has finished already).
        /// - Parameter since: when the follower's own read began (at or after its request arrived).
        func wait(timeout: Duration, slots: CoalescedWaitSlots, since: ContinuousClock.Instant) -> Wait {
            let semaphore = DispatchSemaphore(value: 0)
            let (joinedBeforeRead, ready, waiting) = state.withLock { state in
                var waiting = false
                if state.outcome == nil, slots.acquire() {
                    state.waiters.append(semaphore)
                    waiting = true
                }
                return (state.readStartedAt.map { $0 >= since } ?? true, state.outcome, waiting)
            }
            let outcome: Outcome
            if let ready {
                outcome = ready
            } else {
                guard waiting else { return .refused }
                let signalled = semaphore.wait(timeout: .after(timeout)) == .success
                slots.release()
                guard signalled, let finished = state.withLock({ $0.outcome }) else { return .timedOut }
                outcome = finished
            }
            switch outcome {
            case .found(_, let populated) where joinedBeforeRead || populated:
                return .usable(outcome, readAfterJoin: joinedBeforeRead)
            case .notFound where joinedBeforeRead: return .usable(outcome, readAfterJoin: true)
            case .failed(.unavailable): return .usable(outcome, readAfterJoin: joinedBeforeRead)
            default: return .unusable
            }
        }
    }

    private final class Shard: Sendable {
        let flights = Mutex<[Int64: Flight]>([:])
        /// When the next read of an id past the cache for a floor may start (``turnToReadPastCache(_:spacing:)``).
        let floorReadTurns = Mutex<[Int64: ContinuousClock.Instant]>([:])
    }

    /// Sharded by id: with one map behind one lock, every miss of every worker took that lock
    /// twice, and on the PostgreSQL path 44 % of the process's CPU went to spinning in
    /// `Mutex.lockSlow` (perf, 16 workers on 2 cores).
    private let shards: [Shard] = (0..<64).map { _ in Shard() }

    init() {}

    private func shard(_ id: Int64) -> Shard {
        shards[Int(UInt64(bitPattern: id) % UInt64(shards.count))]
    }

    func join(_ id: Int64) -> Role {
        let candidate = Flight()  // made outside the lock; wasted only by the rare follower
        return shard(id).flights.withLock { flights in
            if let flight = flights[id] { return .follower(flight) }
            flights[id] = candidate
            return .leader(candidate)
        }
    }

    /// When a leader's read of `id` past the cache for a floor may start: now, or `spacing`
    /// after the previous such read's turn, whichever is later (docs/design.md §2.1). The leader
    /// waits until then with its flight open, so floor reads arriving meanwhile share its read.
    func turnToReadPastCache(_ id: Int64, spacing: Duration) -> ContinuousClock.Instant {
        let now = ContinuousClock.now
        return shard(id).floorReadTurns.withLock { turns in
            let turn = turns[id].map { max(now, $0 + spacing) } ?? now
            turns[id] = turn
            // Only recent turns matter: forget the rest once there are many.
            if turns.count > 256 { turns = turns.filter { $0.value + spacing > now } }
            return turn
        }
    }

    /// The read of `id` under way in this process, if any.
    func existing(_ id: Int64) -> Flight? {
        shard(id).flights.withLock { $0[id] }
    }

    /// Takes the flight out of the map so that later readers do not join it; they start their
    /// own. Its followers still get its outcome.
    func close(_ id: Int64, flight: Flight) {
        shard(id).flights.withLock { flights in
            if flights[id] === flight { flights[id] = nil }
        }
    }

    func finish(_ id: Int64, flight: Flight, outcome: Outcome) {
        shard(id).flights.withLock { flights in
            if flights[id] === flight { flights[id] = nil }
        }
        flight.finish(outcome)
    }
}
