import Foundation
import Logging
import MemcachedClient
import PostgresClient
import ServiceRuntime

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
    private let consistency: ConsistencyObserver?
    private let isStopping: () -> Bool
    private let logger: Logger
    private let notify: PostgresStatement

    /// Where the feed stands and how far it may confirm (docs/design.md §3.3).
    private var progress = ReplicationProgress()
    private var pending = PendingRepairs()
    private var lastMonitorUpdate = ContinuousClock.now
    private var lastStatus = ContinuousClock.now
    private var lastRetry = ContinuousClock.now
    private var lastSlotCheck: ContinuousClock.Instant?
    /// Changes of the transaction being applied in parts whose last part has not been applied:
    /// part of what the position cannot confirm yet.
    private var openTransactionChanges = 0
    private var slotReady = false
    /// The slot this feed streams, found again whenever it is not ready (``ensureSlot()``): the
    /// configuration's, or the cluster's in this database.
    private var slotName = ""
    /// The database's `pg_database.oid`, read with the slot's name: what names its clusters' slots.
    private var databaseOID: UInt32?
    /// The stream's refusals at the slot's position, to recognise a change it will never send.
    private var refusals = RepeatedRefusals()
    /// Which database the feed streams, to notice a restore, a failover or another cluster.
    private var database = DatabaseWatch()
    /// When this instance last wrote its node set for the others of its cluster, and the cluster's
    /// node sets then (a change of them is logged).
    private var lastHeartbeat: ContinuousClock.Instant?
    private var reportedNodeSets: [CacheClusterNodeSet] = []
    private var reportedMissingRegistry = false
    /// When a stalled feed last logged its error (at most once a minute), and what it said.
    private var lastStallLog: (time: ContinuousClock.Instant, detail: String)?

    init(
        configuration: ChangeFeedConfiguration, postgres: PostgresConfiguration, memcached: MemcachedConfiguration,
        shared: ProfileCacheShared, monitor: ChangeFeedMonitor, consistency: ConsistencyObserver? = nil,
        stopping: @escaping () -> Bool, logger: Logger
    ) throws {
        self.configuration = configuration
        // Timestamps decode as the API prints them only in UTC and ISO style (ProfileChangeDecoder).
        // The walsender's timeout is the session's own: a consumer that vanishes without closing
        // its connection (a host gone, a partition, a frozen process) holds the slot that long.
        self.replication = postgres.addingSettings([
            ("timezone", "UTC"), ("datestyle", "ISO"),
            ("wal_sender_timeout", "\(configuration.senderTimeout.milliseconds)ms"),
        ]).withApplicationName(configuration.consumerName)
        notify = PostgresStatement(
            name: "change_feed_notify", sql: "SELECT pg_notify($1, $2)", isIdempotent: false)
        connection = PostgresConnection(
            configuration: postgres,
            statements: PostgresProfileStore.statements(for: shared.configuration.profileFields) + [notify, VersionFloor.raise],
            logger: logger)
        cache = try MemcachedConnection(configuration: memcached, logger: logger)
        memcachedServers = memcached.servers
        repository = ProfileRepository(
            store: PostgresProfileStore(connection: connection, catalog: shared.configuration.profileFields, logger: logger),
            cache: cache, shared: shared,
            logger: logger)
        self.monitor = monitor
        self.consistency = consistency
        self.isStopping = stopping
        self.logger = logger
    }

    deinit {
        cache.close()
        connection.close()
    }

    func run() {
        var reportedState: ChangeFeedState?
        /// Once in a row at most, so that a gap that comes back at once cannot spin.
        var resumedAtOnce = false
        while !isStopping() {
            let (state, detail) = attempt()
            monitor.enter(state, detail: detail)
            heartbeat()
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
            if state == .stalled { logStall(detail ?? "") }
            switch state {
            case .standby:
                pause(configuration.takeoverInterval)
            case .starting where !resumedAtOnce:
                resumedAtOnce = true  // a gap was just closed: stream from the new position at once
                continue
            default:
                pause(configuration.reconnectDelay)
            }
            resumedAtOnce = false
        }
        // Stopping: this instance's nodes are no longer one of its cluster's sets.
        try? CacheClusterNodeSet.leave(cluster: configuration.cluster, instance: configuration.consumerName, on: connection)
    }

    /// Writes this instance's memcached nodes for the other instances of its cluster and reads
    /// every cluster's node sets, every `slotCheckInterval` (docs/design.md §3.10). Two sets in one
    /// cluster are logged when they appear and when they go; they never stop the feed.
    private func heartbeat() {
        guard lastHeartbeat.map({ $0.duration(to: .now) >= configuration.slotCheckInterval }) ?? true,
            connection.isConnected
        else { return }
        lastHeartbeat = .now
        let sets: [CacheCluster: [CacheClusterNodeSet]]
        do {
            sets = try CacheClusterNodeSet.heartbeat(
                cluster: configuration.cluster, instance: configuration.consumerName, nodes: memcachedServers,
                expiry: configuration.instanceExpiry, on: connection)
        } catch let error as PostgresError where error.sqlState == .undefinedTable {
            if !reportedMissingRegistry {
                reportedMissingRegistry = true
                logger.warning(
                    "cannot tell other instances of this cache cluster which memcached nodes it serves: run `profile-service migrate` (migration 0006)",
                    metadata: ["error": "\(error.message)"])
            }
            return
        } catch {
            return  // PostgreSQL is down or busy: the next turn tries again
        }
        let own = monitor.recordNodeSets(sets)
        guard own.map(\.nodes) != reportedNodeSets.map(\.nodes) else { return }
        if own.count > 1 {
            logger.warning(
                """
                instances of this cache cluster serve different memcached nodes: only the consumer's are repaired \
                from the change feed, the others are stale until their entries expire; give every instance of the \
                cluster the same --memcached, or each set a --cache-cluster of its own
                """,
                metadata: [
                    "cache_cluster": "\(configuration.cluster)",
                    "node_sets": "\(own.map { $0.nodes.joined(separator: ",") + " (" + $0.instances.joined(separator: " ") + ")" })",
                ])
        } else if reportedNodeSets.count > 1 {
            logger.notice("every instance of this cache cluster serves the same memcached nodes again",
                metadata: ["cache_cluster": "\(configuration.cluster)"])
        }
        reportedNodeSets = own
    }

    /// One turn: take the slot and stream until the stream ends. Returns why it ended.
    private func attempt() -> (ChangeFeedState, String?) {
        do {
            if !connection.isConnected { try connection.connect() }
            let identity = try LogicalReplicationSetup.databaseIdentity(on: connection)
            if let gap = database.observe(identity, seen: progress.serverEnd) { return close(gap) }
            if let gap = try ensureSlot() { return close(gap, slotCreated: gap == .slotMissing) }
        } catch {
            return (.unavailable, "\(error)")
        }
        let stream: LogicalReplicationStream
        do {
            stream = try LogicalReplicationStream(
                configuration: replication, slot: slotName, publication: configuration.publicationName,
                logger: logger)
        } catch let error as PostgresError where error.isObjectInUse {
            checkSlot()
            return (.standby, nil)
        } catch {
            return recover(from: error)
        }
        monitor.enter(.active)
        logger.notice("change feed active: this instance repairs the cache from the commit stream")
        do {
            try consume(stream)
            stream.close()
            return (.starting, nil)
        } catch {
            stream.close()  // the slot is free again before any repair of it
            if !isStopping() { logger.warning("change feed stream ended", metadata: ["error": "\(error)"]) }
            return recover(from: error)
        }
    }

    /// After the stream ended with `error`: a lost connection is retried as it is; a refusal by
    /// the server is looked at — a missing slot, a missing publication, or a change refused again
    /// and again at one position is a gap (docs/design.md §3.7).
    private func recover(from error: any Error) -> (ChangeFeedState, String?) {
        if let error = error as? PostgresError, !error.isRefusal {
            refusals.reset()
            return (.unavailable, "\(error)")
        }
        do {
            guard let slot = try LogicalReplicationSetup.slotStatus(named: slotName, on: connection) else {
                slotReady = false
                return close(.slotMissing)
            }
            if slot.isLost { return close(.slotLost) }
            let position = slot.confirmedFlushLSN ?? .zero
            if let refused = error as? PostgresError, refused.sqlState == .undefinedObject {
                guard try LogicalReplicationSetup.publicationExists(named: configuration.publicationName, on: connection)
                else {
                    return (
                        .stalled,
                        "publication \"\(configuration.publicationName)\" does not exist, so no change reaches the cache; "
                            + "remedy: CREATE PUBLICATION \(configuration.publicationName) FOR TABLE user_profiles "
                            + "(or run `profile-service migrate`)"
                    )
                }
                // The publication exists now but did not when the change at `position` was
                // committed: pgoutput will refuse that change for ever.
                return close(.undecodable(position: position, reason: "\(error)"))
            }
            if refusals.record(at: position) {
                return close(.undecodable(position: position, reason: "\(error)"))
            }
            return (.unavailable, "\(error)")
        } catch {
            return (.unavailable, "\(error)")
        }
    }

    /// Closes a gap (docs/design.md §3.7): takes the position to resume at, makes every entry
    /// written before it unusable (a `flush_all` that every node must answer), and only then moves
    /// the slot there, so a crash in between finds the gap again. Until every node has answered,
    /// the feed is stalled and the slot stays where it was.
    ///
    /// - Parameter slotCreated: the slot was created just now, at a position that is the resume
    ///   point already.
    private func close(_ gap: FeedGap, slotCreated: Bool = false) -> (ChangeFeedState, String?) {
        do {
            var resume: LSN?
            switch gap {
            case .slotLost, .slotMissing:
                // A new slot starts at its own consistent point: every change before it is in
                // what the flush below invalidates.
                if gap == .slotLost {
                    do {
                        try LogicalReplicationSetup.dropSlot(named: slotName, on: connection)
                    } catch let error as PostgresError where error.isObjectInUse {
                        return (.standby, nil)  // another instance is closing it
                    }
                }
                if !slotCreated {
                    slotReady = false
                    _ = try ensureSlot()
                }
            case .databaseReplaced(_, let lastSeenAlive):
                // Versions the lost history handed out must never name other content: the floor
                // goes above them before anything else (docs/design.md §3.7).
                let floor: Int32? = try connection.execute(VersionFloor.raise, [VersionFloor.margin, lastSeenAlive])
                    .rows.first?.decode("floor")
                logger.error(
                    "change feed: new versions start above a raised floor",
                    metadata: ["floor": "\(floor.map { "\($0)" } ?? "already raised for this restore")"])
                // Positions and held repairs of the old database mean nothing in the new one; the
                // flush below supersedes them all.
                progress.reset()
                pending = PendingRepairs()
                slotReady = false
                if try ensureSlot() == nil {
                    resume = try LogicalReplicationSetup.currentPosition(on: connection)
                }
            case .undecodable:
                resume = try LogicalReplicationSetup.currentPosition(on: connection)
            }
            let unflushed = flushEveryNode(reason: "\(gap)")
            guard unflushed.isEmpty else {
                return (
                    .stalled,
                    "\(gap): memcached \(unflushed.map(\.description).joined(separator: ", ")) did not take the flush "
                        + "that makes older entries unusable; retrying (remedy: bring the node back or remove it from "
                        + "--memcached)"
                )
            }
            if let resume {
                try advanceSlot(to: resume)
            }
            refusals.reset()
            if case .databaseReplaced = gap {
                // Seen alive after the floor was raised: a later restore of a backup holding this
                // raise is told apart from this one.
                database.refresh(try LogicalReplicationSetup.databaseIdentity(on: connection))
            }
            monitor.recordGap()
            logger.error(
                "change feed: closed a gap in the commit stream; every cached profile was invalidated",
                metadata: ["gap": "\(gap)", "resume": "\(resume.map { "\($0)" } ?? "new slot")"])
            announceResynchronization()
            return (.starting, nil)
        } catch let error as PostgresError where error.isObjectInUse {
            return (.standby, nil)
        } catch {
            return (.stalled, "\(gap): \(error); retrying")
        }
    }

    /// The walsender of the stream just closed may hold the slot for a moment (55006).
    private func advanceSlot(to position: LSN) throws {
        for attempt in 1...20 {
            do {
                try LogicalReplicationSetup.advanceSlot(named: slotName, to: position, on: connection)
                return
            } catch let error as PostgresError where error.isObjectInUse && attempt < 20 {
                pause(.milliseconds(50))
            }
        }
    }

    private func logStall(_ detail: String) {
        if let last = lastStallLog, last.detail == detail, last.time.duration(to: .now) < .seconds(60) { return }
        lastStallLog = (.now, detail)
        logger.error("change feed stalled: the cache is not repaired from the commit stream", metadata: ["reason": "\(detail)"])
    }

    /// Makes sure the slot exists. A slot this instance streamed before, or one it had to create,
    /// or one PostgreSQL invalidated means changes the cache never saw: that gap is returned.
    /// Which slot is looked for again each time: one of the older name that is gone is created
    /// anew under the database's name (docs/design.md §3.10).
    private func ensureSlot() throws -> FeedGap? {
        if !connection.isConnected { try connection.connect() }
        if slotReady { return nil }
        let databaseOID = try LogicalReplicationSetup.databaseOID(on: connection)
        self.databaseOID = databaseOID
        slotName =
            try configuration.slotName
            ?? CacheClusterSlots.slotName(for: configuration.cluster, inDatabase: databaseOID, on: connection)
        if let slot = try LogicalReplicationSetup.slotStatus(named: slotName, on: connection), slot.isLost {
            return .slotLost
        }
        let created = try LogicalReplicationSetup.ensureSlot(named: slotName, on: connection)
        slotReady = true
        guard created else { return nil }
        logger.notice("created the change feed's replication slot", metadata: ["slot": "\(slotName)"])
        return .slotMissing
    }

    /// Reads the stream, applying each run of committed transactions as one batch as soon as
    /// nothing more is waiting, so a busy stream is applied in batches and a quiet one at once.
    /// A batch holds at most ``ChangeFeedConfiguration/maxChangesInMemory`` changes, and a larger
    /// transaction is applied in parts as it arrives (docs/design.md §3.9).
    private func consume(_ stream: LogicalReplicationStream) throws {
        var decoder = ProfileChangeDecoder(
            maximumPartChanges: configuration.maxChangesInMemory, profileFields: repository.configuration.profileFields)
        var ready: [CommittedTransaction] = []
        var readyChanges = 0
        openTransactionChanges = 0
        /// When the oldest transaction in `ready` arrived.
        var gatheringSince = ContinuousClock.now
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
                progress.received(walEnd: walEnd)
                let decoded = try PgOutputDecoder.decode(payload)
                if case .begin = decoded { progress.transactionBegan() }
                if let transaction = try decoder.consume(decoded) {
                    if transaction.isComplete { progress.transactionCommitted() }
                    // Never more than the bound at once: what is ready goes first if this would pass it.
                    if !ready.isEmpty, readyChanges + transaction.changes.count > configuration.maxChangesInMemory {
                        apply(ready)
                        ready = []
                        readyChanges = 0
                    }
                    if ready.isEmpty { gatheringSince = .now }
                    ready.append(transaction)
                    readyChanges += transaction.changes.count
                    if ready.count >= configuration.maxBatchTransactions || readyChanges >= configuration.maxChangesInMemory
                        || !transaction.isComplete
                    {
                        apply(ready)
                        ready = []
                        readyChanges = 0
                    }
                }
            case .keepalive(let walEnd, _, let replyRequested)?:
                progress.keepalive(walEnd: walEnd, transactionsWaiting: !ready.isEmpty, repairsHeld: !pending.isEmpty)
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
                    readyChanges = 0
                }
            }
            retryPending(force: false)
            try report(to: stream, force: false)
            checkSlot()
        }
    }

    /// Reads the slot's health for the metrics and `/readyz` every `slotCheckInterval`.
    private func checkSlot(force: Bool = false) {
        guard force || lastSlotCheck.map({ $0.duration(to: .now) >= configuration.slotCheckInterval }) ?? true else { return }
        lastSlotCheck = .now
        heartbeat()
        // Every cluster's slot in this database, not only this one's: a cluster whose instances are
        // all gone is seen by the others, by the WAL its slot keeps (docs/design.md §3.10). This one's is among
        // them unless its name is not a cluster's (a test's own slot): then it is read alone.
        let slots = try? LogicalReplicationSetup.slots(namedLike: CacheCluster.slotPattern, on: connection)
        if let slots, let databaseOID { monitor.recordClusters(CacheClusterSlots.clusters(of: slots, inDatabase: databaseOID)) }
        if let own = slots?.first(where: { $0.name == slotName }) {
            monitor.recordSlot(own.status)
        } else if let slot = try? LogicalReplicationSetup.slotStatus(named: slotName, on: connection) {
            monitor.recordSlot(slot)
        } else if connection.isConnected {
            monitor.recordSlot(nil)
        }
        if let identity = try? LogicalReplicationSetup.databaseIdentity(on: connection) { database.refresh(identity) }
    }

    /// Refreshes memcached for a batch of transactions, then announces what changed.
    private func apply(_ transactions: [CommittedTransaction]) {
        let before = progress.applied
        // Not before PostgreSQL shows these commits to other sessions: a repair ahead of that
        // is undone by the next reader that misses (docs/design.md §3.3).
        let xids = transactions.map(\.xid).filter { $0 != 0 }
        if !xids.isEmpty, !CommitVisibility.wait(for: xids, on: connection, limit: configuration.visibilityWait) {
            logger.debug("change feed: commits not seen as visible; repairing anyway", metadata: ["transactions": "\(xids.count)"])
        }
        // Only the last change of each id matters: refreshing is "at least this version".
        var latest: [Int64: ProfileChange] = [:]
        var order: [Int64] = []
        for transaction in transactions {
            if transaction.truncated {
                // Held per node like a row change: a node that missed the flush would serve every
                // truncated profile until its TTL.
                for node in flushEveryNode(reason: "TRUNCATE of user_profiles") {
                    pending.holdFlush(of: node, confirmedBefore: before)
                }
                latest = [:]
                order = []
            }
            for change in transaction.changes {
                if latest.updateValue(change, forKey: change.id) == nil { order.append(change.id) }
            }
        }
        let changes = order.compactMap { latest[$0] }
        let outcomes = repository.refresh(after: changes)
        // The handles the changed rows hold, in the same batch (docs/design.md §12).
        let handlesNotRepaired = repository.repairHandles(after: changes)
        for (change, outcome) in zip(changes, outcomes) {
            if outcome == .failed || handlesNotRepaired.contains(change.id) {
                pending.hold(change, confirmedBefore: before)
            } else {
                pending.release(change.id)
            }
        }
        // A transaction's position is confirmed with its last part, never with an earlier one.
        if let lastComplete = transactions.last(where: \.isComplete) {
            progress.appliedTransactions(through: lastComplete.endLSN)
        }
        openTransactionChanges = transactions.last?.isComplete == false ? openTransactionChanges + changes.count : 0
        if let last = transactions.last {
            monitor.recordApplied(
                outcomes, lastCommitTime: last.commitTime, heldInMemory: changes.count,
                waiting: openTransactionChanges)
        }
        // Held changes too: receivers fetch with `min_version`, which never needs memcached to
        // have the change (docs/design.md §3.3), so their streams need not wait for a node.
        announce(changes, confirmedBefore: before)
        consistency?.observe(changes)
    }

    /// Tries again, every ``ChangeFeedConfiguration/retryInterval``, what did not land: row
    /// repairs, flushes and announcements.
    private func retryPending(force: Bool) {
        guard !pending.isEmpty, force || lastRetry.duration(to: .now) >= configuration.retryInterval else { return }
        lastRetry = .now
        for node in pending.flushes.keys where flush(node, reason: "a flush held for this node") {
            pending.releaseFlush(of: node)
        }
        let changes = pending.changes
        let handlesNotRepaired = repository.repairHandles(after: changes)
        for (change, outcome) in zip(changes, repository.refresh(after: changes))
        where outcome != .failed && !handlesNotRepaired.contains(change.id) {
            pending.release(change.id)
        }
        if let position = pending.announcementsHoldBack {
            announce(pending.takeAnnouncements(), confirmedBefore: position)
        }
    }

    /// Tells PostgreSQL how far memcached has every change — never past a held change — when
    /// that position moves (or the server asks), and refreshes the lag the monitor shows.
    private func report(to stream: LogicalReplicationStream, force: Bool) throws {
        let position = progress.reportable(heldBack: pending.holdsBack)
        let sinceStatus = lastStatus.duration(to: .now)
        if force || (progress.advances(to: position) && sinceStatus >= configuration.statusInterval)
            || sinceStatus >= configuration.statusKeepAliveInterval
        {
            try stream.sendStatus(flushed: position)
            progress.confirmed(position)
            lastStatus = .now
        } else if lastMonitorUpdate.duration(to: .now) < configuration.monitorInterval {
            return
        }
        lastMonitorUpdate = .now
        // The server's own end of WAL, not only what the stream has shown: while PostgreSQL decodes
        // a large transaction it sends nothing of it, and the lag must not read as caught up.
        if let flushed = try? LogicalReplicationSetup.currentPosition(on: connection) { progress.received(walEnd: flushed) }
        monitor.recordPosition(confirmed: progress.confirmed, serverEnd: progress.serverEnd, pending: pending.count)
    }

    /// NOTIFY every instance (live updates, docs/design.md §4) in ``ProfileChangePayload``'s
    /// format. LISTEN/NOTIFY is at-most-once, so one that fails — the session was closed by the
    /// server, an idle timeout, a proxy — is held and sent again on a new session before the
    /// position moves past it: a duplicate is harmless (receivers drop versions that are not
    /// newer), a lost one leaves every other instance's streams behind.
    private func announce(_ changes: [ProfileChange], confirmedBefore position: LSN) {
        guard !changes.isEmpty else { return }
        if !sendNotifications(ProfileChangePayload.payloads(changes)) {
            // All of them again: the payloads sent before the failure arrive twice, harmlessly.
            pending.holdAnnouncement(changes, confirmedBefore: position)
        }
    }

    /// After a gap, every instance reads every profile it streams again (docs/design.md §3.7).
    /// Best effort: a listener that misses it resynchronises when it reconnects anyway.
    private func announceResynchronization() {
        _ = sendNotifications([ProfileChangePayload.resynchronizeAll])
    }

    /// Sends the payloads in order. - Returns: whether all were sent.
    private func sendNotifications(_ payloads: [String]) -> Bool {
        do {
            if !connection.isConnected { try connection.connect() }
            for payload in payloads {
                _ = try connection.execute(notify, [configuration.notificationChannel, payload])
            }
            return true
        } catch {
            logger.warning(
                "change feed NOTIFY failed; sent again before its position is confirmed", metadata: ["error": "\(error)"])
            return false
        }
    }

    /// `flush_all` on every node (after a TRUNCATE or a gap, every cached profile may be stale).
    /// - Returns: the nodes that did not take it.
    private func flushEveryNode(reason: String) -> [MemcachedServer] {
        logger.warning("flushing every memcached node: every cached profile may be stale", metadata: ["reason": "\(reason)"])
        return memcachedServers.filter { !flush($0, reason: reason) }
    }

    private func flush(_ node: MemcachedServer, reason: String) -> Bool {
        guard let error = cache.flush(server: node) else { return true }
        logger.error(
            "memcached flush_all failed; held until the node answers",
            metadata: ["node": "\(node)", "reason": "\(reason)", "error": "\(error)"])
        return false
    }

    private func pause(_ duration: Duration) {
        sleepThread(for: duration, unless: isStopping)
    }
}

@available(*, unavailable, message: "owns the change feed thread's connections")
extension ChangeFeedConsumer: Sendable {}
