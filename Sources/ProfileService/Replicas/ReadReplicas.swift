import Metrics
public import PostgresClient
import ServiceRuntime
import Synchronization

/// The standbys this instance may read from and what it knows of each (docs/design.md §8),
/// shared by every worker's ``PostgresStandbyReader`` and the ``ReplicaMonitor`` that checks them.
///
/// A standby is read only while its last check found it `up`: a standby of this primary (same
/// system identifier, in recovery), within the lag bounds. A worker whose read fails marks it
/// `unreachable` at once, so the others skip it until a check finds it back.
///
/// | series | meaning |
/// | --- | --- |
/// | `profile_service_replica_up{replica}` | 1 while reads may go to the standby |
/// | `profile_service_replica_lag_bytes{replica}` | primary's WAL position − standby's replay position, at the last check |
/// | `profile_service_replica_lag_seconds{replica}` | since the last commit the standby replayed; 0 when caught up |
/// | `profile_service_replica_reads_total{replica,outcome}` | `served`, `behind` (had not replayed the read's position), `failed` |
public final class ReadReplicas: Sendable {
    public struct Configuration: Sendable {
        public var standbys: [PostgresConfiguration]
        /// A standby further behind is skipped until it catches up.
        public var maximumLag: Duration = .seconds(5)
        public var maximumLagBytes: UInt64 = 16 << 20
        /// How often each standby (and the primary's position) is checked.
        public var checkInterval: Duration = .seconds(1)
        /// How long a read waits for a standby a little behind its position to replay it, before
        /// the primary answers; 0 never waits.
        public var catchUpWait: Duration = .milliseconds(5)

        public init(standbys: [PostgresConfiguration]) {
            self.standbys = standbys
        }
    }

    public enum State: String, Sendable {
        /// Not checked yet: not read from.
        case unknown
        case up
        /// Beyond `--replica-max-lag-s` or `--replica-max-lag-bytes`.
        case lagging
        /// The check or a read failed (down, stopped, refusing).
        case unreachable
        /// Answers, but not as a standby of this primary: promoted, or another cluster.
        case notStandby = "not_standby"
        /// The primary commits with `synchronous_commit = off`: a commit is visible before it is
        /// flushed, so no flushed position proves a standby has it (docs/design.md §8).
        case unprovable
    }

    /// One standby as `/readyz` reports it.
    public struct Status: Sendable, Equatable {
        public var name: String
        public var state: State
        public var lagBytes: UInt64?
        public var lagSeconds: Double?
        /// Why it is not `up`.
        public var detail: String?
        public var readsServed: Int
    }

    /// What one check of a standby found.
    public struct Check: Sendable, Equatable {
        public var systemIdentifier: String
        public var inRecovery: Bool
        public var replayed: LSN?
        /// Seconds since the commit the standby replayed last (`nil`: none since it started).
        public var replayAge: Double?

        public init(systemIdentifier: String, inRecovery: Bool, replayed: LSN?, replayAge: Double?) {
            self.systemIdentifier = systemIdentifier
            self.inRecovery = inRecovery
            self.replayed = replayed
            self.replayAge = replayAge
        }
    }

    /// The primary as the same round of checks found it.
    public struct PrimarySample: Sendable, Equatable {
        public var systemIdentifier: String
        public var position: LSN
        /// Whether its commits are flushed before they become visible (`synchronous_commit` is
        /// not `off`): what a flushed position proves rests on it.
        public var flushesCommits: Bool

        public init(systemIdentifier: String, position: LSN, flushesCommits: Bool = true) {
            self.systemIdentifier = systemIdentifier
            self.position = position
            self.flushesCommits = flushesCommits
        }
    }

    public final class Standby: Sendable {
        /// `host:port`, the label of its metrics.
        public let name: String
        let configuration: PostgresConfiguration
        /// Shared by every worker's connection to it (docs/design.md §5.2).
        let health = PostgresServerHealth()
        private let usable = Atomic<Bool>(false)
        private let status: Mutex<Status>
        private let reads: Atomic<Int> = Atomic(0)
        private let served: Counter
        private let behind: Counter
        private let failed: Counter
        private let upGauge: Gauge
        private let lagBytesGauge: Gauge
        private let lagSecondsGauge: Gauge

        init(configuration: PostgresConfiguration) {
            self.configuration = configuration
            let name = "\(configuration.value(for: "host") ?? "localhost"):\(configuration.value(for: "port") ?? "5432")"
            self.name = name
            status = Mutex(Status(name: name, state: .unknown, readsServed: 0))
            func reads(_ outcome: String) -> Counter {
                Counter(label: MetricFamily.replicaReads.name, dimensions: [("replica", name), ("outcome", outcome)])
            }
            served = reads("served")
            behind = reads("behind")
            failed = reads("failed")
            upGauge = Gauge(label: MetricFamily.replicaUp.name, dimensions: [("replica", name)])
            lagBytesGauge = Gauge(label: MetricFamily.replicaLagBytes.name, dimensions: [("replica", name)])
            lagSecondsGauge = Gauge(label: MetricFamily.replicaLagSeconds.name, dimensions: [("replica", name)])
            upGauge.record(0)
        }

        /// Whether reads may go to it now (no lock: read on every miss).
        public var isUsable: Bool { usable.load(ordering: .acquiring) }

        /// Its lag at the last check, in seconds.
        var currentLagSeconds: Double? { status.withLock { $0.lagSeconds } }

        public var currentStatus: Status {
            var current = status.withLock { $0 }
            current.readsServed = reads.load(ordering: .relaxed)
            return current
        }

        func recordServed(rows: Int = 1) {
            reads.add(rows, ordering: .relaxed)
            served.increment(by: rows)
        }

        func recordBehind() { behind.increment() }

        /// A read failed: skipped by every worker until a check finds it back.
        func recordFailure(_ detail: String) {
            failed.increment()
            set(state: .unreachable, detail: detail, lagBytes: nil, lagSeconds: nil)
        }

        /// A worker's new session is not a standby of the primary.
        func recordNotStandby(_ detail: String) {
            set(state: .notStandby, detail: detail, lagBytes: nil, lagSeconds: nil)
        }

        func set(state: State, detail: String?, lagBytes: UInt64?, lagSeconds: Double?) {
            status.withLock { status in
                status.state = state
                status.detail = detail
                status.lagBytes = lagBytes
                status.lagSeconds = lagSeconds
            }
            usable.store(state == .up, ordering: .releasing)
            upGauge.record(state == .up ? 1 : 0)
            if let lagBytes { lagBytesGauge.record(Int64(clamping: lagBytes)) }
            if let lagSeconds { lagSecondsGauge.record(lagSeconds) }
        }
    }

    public let configuration: Configuration
    public let standbys: [Standby]
    /// The primary's system identifier as the last check read it: a worker's session to a
    /// standby must show the same one before it is read (a standby of another cluster has
    /// positions that prove nothing here).
    private let primaryIdentifier = Mutex<String?>(nil)

    public init(configuration: Configuration) {
        self.configuration = configuration
        standbys = configuration.standbys.map(Standby.init)
    }

    public var primarySystemIdentifier: String? { primaryIdentifier.withLock { $0 } }

    public var statuses: [Status] { standbys.map(\.currentStatus) }

    /// The state one check implies, with why it is not `up` (a pure rule; ``ReplicaMonitor``
    /// applies it).
    public static func state(
        of check: Check, primary: PrimarySample, maximumLag: Duration, maximumLagBytes: UInt64
    ) -> (state: State, detail: String?, lagBytes: UInt64?, lagSeconds: Double?) {
        guard primary.flushesCommits else {
            return (.unprovable, "the primary runs with synchronous_commit = off: commits are visible before they are flushed", nil, nil)
        }
        guard check.systemIdentifier == primary.systemIdentifier else {
            return (.notStandby, "system identifier \(check.systemIdentifier), the primary's is \(primary.systemIdentifier)", nil, nil)
        }
        guard check.inRecovery, let replayed = check.replayed else {
            return (.notStandby, "not in recovery (promoted?)", nil, nil)
        }
        let lagBytes = primary.position > replayed ? primary.position.rawValue - replayed.rawValue : 0
        let lagSeconds = lagBytes == 0 ? 0 : max(0, check.replayAge ?? 0)
        if lagBytes > maximumLagBytes {
            return (.lagging, "\(lagBytes) bytes behind (bound \(maximumLagBytes))", lagBytes, lagSeconds)
        }
        if lagSeconds > Double(maximumLag.milliseconds) / 1000 {
            return (.lagging, "\(lagSeconds) s behind (bound \(maximumLag))", lagBytes, lagSeconds)
        }
        return (.up, nil, lagBytes, lagSeconds)
    }

    func record(primary: PrimarySample) {
        primaryIdentifier.withLock { $0 = primary.systemIdentifier }
    }
}
