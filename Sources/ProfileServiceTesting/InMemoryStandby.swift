public import PostgresClient
public import ProfileService
import Synchronization

/// A streaming standby of an ``InMemoryDatabase``: it shows the rows as of the first `replayed`
/// changes of the database's log and replays more only when told — a standby as late as a test
/// needs (docs/design.md §8). It can also be failed, or made to claim a replay position it has
/// not reached (a standby whose position proves nothing: the floor rule must still hold).
public final class InMemoryStandby: StandbyReader, Sendable {
    private struct State {
        var replayed = 0
        var claimed: Int?
        var unavailable = false
        var reads = 0
    }

    public let database: InMemoryDatabase
    private let state = Mutex(State())

    /// A standby that has replayed everything committed so far.
    public init(of database: InMemoryDatabase) {
        self.database = database
        catchUp()
    }

    /// Replays every change committed so far.
    public func catchUp() {
        let position = database.position
        state.withLock { $0.replayed = position }
    }

    /// Claims `position` as its replay position whatever it has replayed (`nil`: the truth).
    public func claim(replayed position: Int?) { state.withLock { $0.claimed = position } }

    /// Every read answers ``StandbyAnswer/unavailable`` until set back (a standby that is down).
    public func setUnavailable(_ unavailable: Bool) { state.withLock { $0.unavailable = unavailable } }

    /// Rows read from it so far.
    public var reads: Int { state.withLock { $0.reads } }

    public var hasUsableStandby: Bool { state.withLock { !$0.unavailable } }

    public func profile(id: Int64, replayedThrough position: LSN) -> StandbyAnswer<Profile?> {
        answer(position, rows: 1) { replayed in database.row(id: id, asOf: replayed) }
    }

    public func profiles(ids: [Int64], replayedThrough position: LSN) -> StandbyAnswer<[Int64: Profile]> {
        answer(position, rows: ids.count) { replayed in
            var rows: [Int64: Profile] = [:]
            for id in ids { rows[id] = database.row(id: id, asOf: replayed) }
            return rows
        }
    }

    private func answer<Value>(_ position: LSN, rows: Int, _ read: (Int) -> Value) -> StandbyAnswer<Value> {
        let (replayed, claimed, unavailable) = state.withLock { ($0.replayed, $0.claimed ?? $0.replayed, $0.unavailable) }
        if unavailable { return .unavailable }
        guard UInt64(claimed) >= position.rawValue else { return .behind }
        state.withLock { $0.reads += rows }
        return .read(read(replayed))
    }
}
