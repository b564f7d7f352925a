import Foundation
import Logging
import MemcachedClient
import PostgresClient

/// The change feed's loop, on its own thread, with connections of its own: a replication
/// stream (while this instance holds the slot), a memcached client, and an ordinary PostgreSQL
/// connection for setup and NOTIFY. docs/design.md §3 explains each step.
final class ChangeFeedConsumer {
    private let configuration: ChangeFeedConfiguration
    private let replication: PostgresConfiguration
    private let connection: PostgresConnection
    private let cache: MemcachedConnection
    private let repository: ProfileRepository
    private let memcachedServers: [MemcachedServer]
    private let monitor: ChangeFeedMonitor
    private let isStopping: () -> Bool
    private let logger: Logger
    private let notify: PostgresStatement

    /// Where the feed stands: everything up to here is in memcached (or held in ``pending``).
    private var applied = LSN.zero
    /// The furthest position the server reported; the difference to ``confirmed`` is the lag.
    private var serverEnd = LSN.zero
    private var confirmed = LSN.zero
    private var pending = PendingRepairs()
    private var lastMonitorUpdate = ContinuousClock.now
    private var lastStatus = ContinuousClock.now
    private var lastRetry = ContinuousClock.now
    private var slotReady = false

    init(
        configuration: ChangeFeedConfiguration, postgres: PostgresConfiguration, memcached: MemcachedConfiguration,
        shared: ProfileCacheShared, monitor: ChangeFeedMonitor, stopping: @escaping () -> Bool, logger: Logger
    ) throws {
        self.configuration = configuration
        // Timestamps decode as the API prints them only in UTC and ISO style (ProfileChangeDecoder).
        self.replication = postgres.addingSettings([("timezone", "UTC"), ("datestyle", "ISO")])
        notify = PostgresStatement(
            name: "change_feed_notify", sql: "SELECT pg_notify($1, $2)", isIdempotent: false)
        connection = PostgresConnection(
            configuration: postgres, statements: PostgresProfileStore.statements + [notify], logger: logger)
        cache = try MemcachedConnection(configuration: memcached, logger: logger)
        memcachedServers = memcached.servers
        repository = ProfileRepository(
            store: PostgresProfileStore(connection: connection, logger: logger), cache: cache, shared: shared,
            logger: logger)
        self.monitor = monitor
        self.isStopping = stopping
        self.logger = logger
    }

    deinit {
        cache.close()
        connection.close()
    }

    func run() {
        var reportedState: ChangeFeedState?
        while !isStopping() {
            let (state, detail) = attempt()
            monitor.enter(state, detail: detail)
            if state != reportedState {
                switch state {
                case .standby:
                    logger.info("change feed on standby: another instance consumes the slot")
                case .unavailable:
                    logger.warning("change feed unavailable; retrying", metadata: ["reason": "\(detail ?? "")"])
                default:
                    break
                }
                reportedState = state
            }
            pause(state == .standby ? configuration.takeoverInterval : configuration.reconnectDelay)
        }
    }

    /// One turn: take the slot and stream until the stream ends. Returns why it ended.
    private func attempt() -> (ChangeFeedState, String?) {
        do {
            try ensureSlot()
        } catch {
            return (.unavailable, "\(error)")
        }
        let stream: LogicalReplicationStream
        do {
            stream = try LogicalReplicationStream(
                configuration: replication, slot: configuration.slotName, publication: configuration.publicationName,
                logger: logger)
        } catch let error as PostgresError where error.isObjectInUse {
            return (.standby, nil)
        } catch {
            return (.unavailable, "\(error)")
        }
        defer { stream.close() }
        monitor.enter(.active)
        logger.notice("change feed active: this instance repairs the cache from the commit stream")
        do {
            try consume(stream)
            return (.starting, nil)
        } catch {
            if !isStopping() { logger.warning("change feed stream ended", metadata: ["error": "\(error)"]) }
            return (.unavailable, "\(error)")
        }
    }

    private func ensureSlot() throws {
        if !connection.isConnected { try connection.connect() }
        if slotReady {
            guard try LogicalReplicationSetup.slotStatus(named: configuration.slotName, on: connection)?.isLost == true
            else { return }
            try rebuildLostSlot()
        }
        if try LogicalReplicationSetup.ensureSlot(named: configuration.slotName, on: connection) {
            logger.notice("created the change feed's replication slot", metadata: ["slot": "\(configuration.slotName)"])
        }
        slotReady = true
    }

    /// PostgreSQL invalidated the slot: it fell further behind than `max_slot_wal_keep_size`
    /// while nobody consumed it, so changes were lost and any cached profile may be stale. The
    /// only safe repair is an empty cache and a new slot (docs/design.md §3.3).
    private func rebuildLostSlot() throws {
        logger.error(
            "the change feed's slot was invalidated (max_slot_wal_keep_size exceeded): flushing memcached and recreating it",
            metadata: ["slot": "\(configuration.slotName)"])
        do {
            try LogicalReplicationSetup.dropSlot(named: configuration.slotName, on: connection)
        } catch let error as PostgresError where error.isObjectInUse {
            return  // another instance is rebuilding it
        }
        flushEveryNode()
        slotReady = false
    }

    /// Reads the stream, applying each run of committed transactions as one batch as soon as
    /// nothing more is waiting, so a busy stream is applied in batches and a quiet one at once.
    private func consume(_ stream: LogicalReplicationStream) throws {
        var decoder = ProfileChangeDecoder()
        var ready: [CommittedTransaction] = []
        /// When the oldest transaction in `ready` arrived.
        var gatheringSince = ContinuousClock.now
        var inTransaction = false
        while !isStopping() {
            if pending.count >= configuration.maxPendingRepairs {
                // Backpressure: stop reading until memcached takes the held changes.
                retryPending(force: true)
                if pending.count >= configuration.maxPendingRepairs {
                    pause(configuration.retryInterval)
                    try report(to: stream, force: false)
                    continue
                }
            }
            let message = try stream.next(timeout: ready.isEmpty ? configuration.retryInterval : .zero)
            switch message {
            case .walData(_, let walEnd, _, let payload)?:
                serverEnd = max(serverEnd, walEnd)
                let decoded = try PgOutputDecoder.decode(payload)
                if case .begin = decoded { inTransaction = true }
                if let transaction = try decoder.consume(decoded) {
                    inTransaction = false
                    if ready.isEmpty { gatheringSince = .now }
                    ready.append(transaction)
                    if ready.count >= configuration.maxBatchTransactions {
                        apply(ready)
                        ready = []
                    }
                }
            case .keepalive(let walEnd, _, let replyRequested)?:
                serverEnd = max(serverEnd, walEnd)
                // Everything before a keepalive has arrived; with nothing open or held, the
                // position may move up to it (the WAL of other tables need not be kept).
                if ready.isEmpty && !inTransaction && pending.isEmpty { applied = max(applied, walEnd) }
                if replyRequested { try report(to: stream, force: true) }
            case nil:
                if !ready.isEmpty {
                    // Nothing more has arrived: let more commits gather (without a wake-up for
                    // each), then apply them all.
                    let waited = gatheringSince.duration(to: .now)
                    if waited < configuration.gatherDelay {
                        sleepThread(for: configuration.gatherDelay - waited)
                        continue
                    }
                    apply(ready)
                    ready = []
                }
            }
            retryPending(force: false)
            try report(to: stream, force: false)
        }
    }

    /// Refreshes memcached for a batch of transactions, then announces what changed.
    private func apply(_ transactions: [CommittedTransaction]) {
        let before = applied
        // Only the last change of each id matters: refreshing is "at least this version".
        var latest: [Int64: ProfileChange] = [:]
        var order: [Int64] = []
        for transaction in transactions {
            if transaction.truncated {
                flushEveryNode()
                latest = [:]
                order = []
            }
            for change in transaction.changes {
                if latest.updateValue(change, forKey: change.id) == nil { order.append(change.id) }
            }
        }
        let changes = order.compactMap { latest[$0] }
        let outcomes = repository.refresh(after: changes)
        var announced: [ProfileChange] = []
        for (change, outcome) in zip(changes, outcomes) {
            if outcome == .failed {
                pending.hold(change, confirmedBefore: before)
            } else {
                pending.release(change.id)
                announced.append(change)
            }
        }
        if let last = transactions.last {
            applied = last.endLSN
            monitor.recordApplied(outcomes, lastCommitTime: last.commitTime)
        }
        announce(announced)
    }

    private func retryPending(force: Bool) {
        guard !pending.isEmpty, force || lastRetry.duration(to: .now) >= configuration.retryInterval else { return }
        lastRetry = .now
        var announced: [ProfileChange] = []
        let changes = pending.changes
        for (change, outcome) in zip(changes, repository.refresh(after: changes)) where outcome != .failed {
            pending.release(change.id)
            announced.append(change)
        }
        announce(announced)
    }

    /// Tells PostgreSQL how far memcached has every change — never past a held change — when
    /// that position moves (or the server asks), and refreshes the lag the monitor shows.
    private func report(to stream: LogicalReplicationStream, force: Bool) throws {
        let position = min(applied, pending.holdsBack ?? applied)
        if force || (position > confirmed && lastStatus.duration(to: .now) >= configuration.statusInterval) {
            try stream.sendStatus(flushed: position)
            confirmed = max(confirmed, position)
            lastStatus = .now
        } else if lastMonitorUpdate.duration(to: .now) < configuration.monitorInterval {
            return
        }
        lastMonitorUpdate = .now
        monitor.recordPosition(confirmed: confirmed, serverEnd: serverEnd, pending: pending.count)
    }

    /// NOTIFY every instance (live updates, docs/design.md §4) in ``ProfileChangePayload``'s
    /// format. Best effort: LISTEN/NOTIFY is at-most-once anyway, and listeners resynchronize
    /// when they reconnect.
    private func announce(_ changes: [ProfileChange]) {
        guard !changes.isEmpty else { return }
        do {
            if !connection.isConnected { try connection.connect() }
            for payload in ProfileChangePayload.payloads(changes) {
                _ = try connection.execute(notify, [ProfileChangePayload.channel, payload])
            }
        } catch {
            logger.debug("change feed NOTIFY failed", metadata: ["error": "\(error)"])
        }
    }

    /// After a TRUNCATE of `user_profiles`, or a lost slot, every cached profile may be stale.
    private func flushEveryNode() {
        logger.warning("flushing every memcached node: every cached profile may be stale")
        for server in memcachedServers {
            if let error = cache.flush(server: server) {
                logger.error("flush after TRUNCATE failed", metadata: ["node": "\(server)", "error": "\(error)"])
            }
        }
    }

    private func pause(_ duration: Duration) {
        sleepThread(for: duration, unless: isStopping)
    }
}

@available(*, unavailable, message: "owns the change feed thread's connections")
extension ChangeFeedConsumer: Sendable {}
