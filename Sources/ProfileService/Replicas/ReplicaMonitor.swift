import Foundation
public import Logging
public import PostgresClient
public import ServiceRuntime
import Synchronization

/// Checks every standby of ``ReadReplicas`` on a thread of its own, once per
/// ``ReadReplicas/Configuration/checkInterval``, and sets each one's state (docs/design.md §8).
///
/// A round reads each standby (identity, recovery, replay position, age of the last replayed
/// commit), then the primary's identity, flushed WAL position and `synchronous_commit` — after
/// the standbys, so the byte lag is never understated. Each check is one statement on a connection of its own, bounded by the
/// standby's statement timeout and response deadline; a standby that does not answer is
/// `unreachable` until a later round finds it back. When the primary cannot be read, no standby
/// is judged that round (their lag is unknown) and every state stays as it was; reads then go to
/// the primary anyway, which is down.
public final class ReplicaMonitor: BackgroundService {
    private static let standbyCheck = PostgresStatement(
        name: "replica_check",
        sql: """
            SELECT system_identifier::text AS system, pg_is_in_recovery() AS recovering,
                   pg_last_wal_replay_lsn()::text AS replayed,
                   extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS replay_age
            FROM pg_control_system()
            """,
        isIdempotent: true)
    private static let primaryCheck = PostgresStatement(
        name: "replica_check_primary",
        sql: """
            SELECT system_identifier::text AS system, pg_current_wal_flush_lsn()::text AS position,
                   current_setting('synchronous_commit') AS synchronous_commit
            FROM pg_control_system()
            """,
        isIdempotent: true)

    private let replicas: ReadReplicas
    private let primary: PostgresConfiguration
    private let logger: Logger
    private let stopped = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    public init(replicas: ReadReplicas, primary: PostgresConfiguration, logger: Logger) {
        self.replicas = replicas
        self.primary = primary
        self.logger = logger
    }

    public var serviceName: String { "replica monitor" }

    public func start() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = "replica-monitor"
        thread.start()
    }

    @discardableResult
    public func stop(deadline: ContinuousClock.Instant) -> Bool {
        guard started.load(ordering: .relaxed), !stopped.exchange(true, ordering: .relaxed) else { return true }
        return finished.wait(timeout: .after(ContinuousClock.now.duration(to: deadline))) == .success
    }

    private func run() {
        let primaryConnection = PostgresConnection(configuration: primary, statements: [Self.primaryCheck], logger: logger)
        // On each standby's shared health: a check that connects is what lets the workers connect
        // again after an outage, so a standby is never `up` while the workers still back off.
        let standbyConnections = replicas.standbys.map {
            PostgresConnection(
                configuration: $0.configuration, statements: [Self.standbyCheck], health: $0.health, logger: logger)
        }
        defer {
            primaryConnection.close()
            for connection in standbyConnections { connection.close() }
        }
        while !stopped.load(ordering: .relaxed) {
            checkOnce(primary: primaryConnection, standbys: standbyConnections)
            sleepThread(for: replicas.configuration.checkInterval) { stopped.load(ordering: .relaxed) }
        }
    }

    private func checkOnce(primary: PostgresConnection, standbys: [PostgresConnection]) {
        let checks: [Result<ReadReplicas.Check, any Error>] = standbys.map { connection in
            Result { try Self.check(connection) }
        }
        let primarySample: ReadReplicas.PrimarySample
        do {
            guard let row = try primary.execute(Self.primaryCheck, []).rows.first,
                let position = LSN(try row.decode("position", as: String.self))
            else { return }
            primarySample = ReadReplicas.PrimarySample(
                systemIdentifier: try row.decode("system"), position: position,
                flushesCommits: try row.decode("synchronous_commit", as: String.self) != "off")
        } catch {
            logger.debug("replica check: the primary did not answer", metadata: ["error": "\(error)"])
            return
        }
        replicas.record(primary: primarySample)
        for (standby, check) in zip(replicas.standbys, checks) {
            let before = standby.currentStatus.state
            switch check {
            case .success(let check):
                let judged = ReadReplicas.state(
                    of: check, primary: primarySample, maximumLag: replicas.configuration.maximumLag,
                    maximumLagBytes: replicas.configuration.maximumLagBytes)
                standby.set(state: judged.state, detail: judged.detail, lagBytes: judged.lagBytes, lagSeconds: judged.lagSeconds)
            case .failure(let error):
                standby.set(state: .unreachable, detail: "\(error)", lagBytes: nil, lagSeconds: nil)
            }
            let after = standby.currentStatus
            if after.state != before {
                logger.log(
                    level: after.state == .up ? .notice : .warning, "replica state changed",
                    metadata: [
                        "replica": "\(standby.name)", "state": "\(after.state.rawValue)",
                        "detail": "\(after.detail ?? "")",
                    ])
            }
        }
    }

    static func check(_ connection: PostgresConnection) throws -> ReadReplicas.Check {
        guard let row = try connection.execute(standbyCheck, []).rows.first else {
            throw PostgresError(kind: .other, message: "the replica check returned no row")
        }
        return ReadReplicas.Check(
            systemIdentifier: try row.decode("system"), inRecovery: try row.decode("recovering"),
            replayed: try row.decodeIfPresent("replayed", as: String.self).flatMap(LSN.init),
            replayAge: try row.decodeIfPresent("replay_age", as: Double.self))
    }
}
