public import Logging
public import PostgresClient
import ServiceRuntime

/// Reads from the standbys of ``ReadReplicas``: a connection to each, used by one thread at a
/// time (docs/design.md §8); the workers borrow them from a ``PooledStandbyReader``.
///
/// A read goes to the usable standbys in turn (each worker starts at a different one) and is
/// answered by the first that proves it has replayed the position: its replay position, read on
/// the same session *before* the row, is at or past it. A replay position read earlier on the
/// session serves while it is high enough — replay only moves forward within a session — so a
/// read that needs no newer proof costs one round trip. A new session is first checked to be a
/// standby of the primary (its system identifier), since a URL may lead somewhere else after a
/// reconnect.
public final class PostgresStandbyReader: StandbyReader {
    private struct Session {
        let standby: ReadReplicas.Standby
        let connection: PostgresConnection
        let store: PostgresProfileStore
        /// The session that passed the identity check.
        var verifiedSession = 0
        /// The replay position last read, and on which session.
        var replayed: (session: Int, position: LSN)?
    }

    private static let identity = PostgresStatement(
        name: "standby_identity",
        sql: "SELECT system_identifier::text AS system, pg_is_in_recovery() AS recovering FROM pg_control_system()",
        isIdempotent: true)
    private static let replayPosition = PostgresStatement(
        name: "standby_replay_position", sql: "SELECT pg_last_wal_replay_lsn()::text AS replayed", isIdempotent: true)

    private let replicas: ReadReplicas
    private var sessions: [Session]
    private var next: Int

    /// - Parameter first: the standby this worker tries first (say, the worker's index).
    ///   - profileFields: the declared fields the sessions' statements are written for.
    public init(replicas: ReadReplicas, first: Int, profileFields: ProfileFieldCatalog = .standard, logger: Logger) {
        self.replicas = replicas
        sessions = replicas.standbys.map { standby in
            var logger = logger
            logger[metadataKey: "replica"] = "\(standby.name)"
            let connection = PostgresConnection(
                configuration: standby.configuration,
                statements: PostgresProfileStore.readStatements(for: profileFields) + [Self.identity, Self.replayPosition],
                health: standby.health, logger: logger)
            return Session(standby: standby, connection: connection, store: PostgresProfileStore(connection: connection, catalog: profileFields, logger: logger))
        }
        next = sessions.isEmpty ? 0 : first % sessions.count
    }

    /// Closes every connection, on the worker's thread.
    public func close() {
        for session in sessions { session.connection.close() }
    }

    /// Lets another thread use the reader from now on (``PooledStandbyReader`` lends it).
    public func releaseOwnerThread() {
        for session in sessions { session.connection.releaseOwnerThread() }
    }

    public var hasUsableStandby: Bool { sessions.contains { $0.standby.isUsable } }

    public func profile(id: Int64, replayedThrough position: LSN) -> StandbyAnswer<Profile?> {
        answer(position, rows: { $0 == nil ? 0 : 1 }) { store throws(ProfileStoreError) in try store.profile(id: id) }
    }

    public func profiles(ids: [Int64], replayedThrough position: LSN) -> StandbyAnswer<[Int64: Profile]> {
        answer(position, rows: { $0.count }) { store throws(ProfileStoreError) in try store.profiles(ids: ids) }
    }

    private func answer<Value>(
        _ position: LSN, rows: (Value) -> Int, _ query: (PostgresProfileStore) throws(ProfileStoreError) -> Value
    ) -> StandbyAnswer<Value> {
        var anyBehind = false
        for offset in sessions.indices {
            let index = (next + offset) % sessions.count
            guard sessions[index].standby.isUsable else { continue }
            switch read(from: index, position: position, query) {
            case .read(let value):
                sessions[index].standby.recordServed(rows: max(1, rows(value)))
                next = (index + 1) % sessions.count
                return .read(value)
            case .behind:
                anyBehind = true
            case .unavailable:
                continue
            }
        }
        return anyBehind ? .behind : .unavailable
    }

    private func read<Value>(
        from index: Int, position: LSN, _ query: (PostgresProfileStore) throws(ProfileStoreError) -> Value
    ) -> StandbyAnswer<Value> {
        let standby = sessions[index].standby
        let connection = sessions[index].connection
        do {
            try connection.connect()
            let session = connection.sessionsOpened
            if sessions[index].verifiedSession != session {
                guard try isStandbyOfPrimary(connection, standby: standby) else { return .unavailable }
                sessions[index].verifiedSession = session
            }
            var replayed = sessions[index].replayed.flatMap { $0.session == session ? $0.position : nil }
            if replayed.map({ $0 < position }) ?? true {
                // No position at all: not in recovery (promoted), marked by catchUp.
                guard let caughtUp = try catchUp(index, session: session, to: position) else { return .unavailable }
                replayed = caughtUp
            }
            guard let replayed, replayed >= position else {
                standby.recordBehind()
                return .behind
            }
            let value = try query(sessions[index].store)
            // Every step on one session, or the replay position proves nothing about the row.
            guard connection.sessionsOpened == session else { return .behind }
            return .read(value)
        } catch {
            standby.recordFailure("\(error)")
            return .unavailable
        }
    }

    /// The standby's replay position, read again every ``pollInterval`` until it reaches `position`
    /// or the catch-up wait runs out: a healthy standby is a few milliseconds behind a primary
    /// that is being written, and without the wait every miss would find it behind. A standby
    /// whose last check found it later than the wait is asked once, not waited for.
    private func catchUp(_ index: Int, session: Int, to position: LSN) throws -> LSN? {
        let standby = sessions[index].standby
        let wait = replicas.configuration.catchUpWait
        let deadline = ContinuousClock.now + wait
        let worthWaiting = (standby.currentLagSeconds ?? 0) * 1000 < Double(wait.milliseconds)
        while true {
            let text = try sessions[index].connection.execute(Self.replayPosition, []).rows.first?
                .decodeIfPresent("replayed", as: String.self)
            guard let text, let replayed = LSN(text) else {
                standby.recordNotStandby("pg_last_wal_replay_lsn() is NULL: not in recovery")
                return nil
            }
            sessions[index].replayed = (session, replayed)
            if replayed >= position || !worthWaiting || ContinuousClock.now + Self.pollInterval > deadline { return replayed }
            sleepThread(for: Self.pollInterval)
        }
    }

    private static let pollInterval = Duration.microseconds(500)

    private func isStandbyOfPrimary(_ connection: PostgresConnection, standby: ReadReplicas.Standby) throws -> Bool {
        guard let row = try connection.execute(Self.identity, []).rows.first else { return false }
        let system = try row.decode("system", as: String.self)
        let recovering = try row.decode("recovering", as: Bool.self)
        guard let primary = replicas.primarySystemIdentifier, system == primary, recovering else {
            standby.recordNotStandby(recovering ? "system identifier \(system) is not the primary's" : "not in recovery")
            return false
        }
        return true
    }
}

@available(*, unavailable, message: "owns PostgresConnections, which belong to one thread")
extension PostgresStandbyReader: Sendable {}
