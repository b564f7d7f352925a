import Dispatch
import Synchronization

/// Shares one PostgreSQL read among concurrent misses of one id in this process.
///
/// A follower that joined before the leader's read began may use its result as is: the read
/// began after the follower's request did. A follower that joined later uses it only if the
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

    final class Flight: Sendable {
        private struct State {
            var readStarted = false
            var outcome: Outcome?
            var waiters: [DispatchSemaphore] = []
        }

        private let state = Mutex(State())

        func markReadStarted() {
            state.withLock { $0.readStarted = true }
        }

        fileprivate func finish(_ outcome: Outcome) {
            let waiters = state.withLock { state in
                state.outcome = outcome
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.signal() }
        }

        /// Waits for the leader, at most `timeout`. Returns the outcome if the follower may use it.
        func usableOutcome(timeout: Duration) -> Outcome? {
            let semaphore = DispatchSemaphore(value: 0)
            let (joinedBeforeRead, ready) = state.withLock { state in
                if state.outcome == nil { state.waiters.append(semaphore) }
                return (!state.readStarted, state.outcome)
            }
            let outcome: Outcome?
            if let ready {
                outcome = ready
            } else {
                guard semaphore.wait(timeout: .after(timeout)) == .success else { return nil }
                outcome = state.withLock { $0.outcome }
            }
            switch outcome {
            case .found(_, let populated)? where joinedBeforeRead || populated: return outcome
            case .notFound? where joinedBeforeRead: return outcome
            case .failed(.unavailable)?: return outcome
            default: return nil
            }
        }
    }

    private final class Shard: Sendable {
        let flights = Mutex<[Int64: Flight]>([:])
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
