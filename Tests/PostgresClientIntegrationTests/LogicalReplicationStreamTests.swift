import Foundation
import PostgresClient
import Synchronization
import TestSupport
import Testing

extension PostgresServerTests {
    /// The replication protocol against the real server: each test makes its own table,
    /// publication and slot, and drops them (an abandoned slot holds WAL).
    @Suite struct LogicalReplicationStreamTests {
        @Test func streamsBeginRelationInsertUpdateDeleteCommitInOrder() throws {
            try Feed.with("order") { feed, connection in
                let stream = try feed.stream()
                defer { stream.close() }

                let before = Date()
                try connection.simpleQuery("INSERT INTO \(feed.table) (id, name, note) VALUES (1, 'ada', NULL)")
                try connection.simpleQuery("UPDATE \(feed.table) SET name = 'ada ✓', note = 'it''s' WHERE id = 1")
                try connection.simpleQuery("DELETE FROM \(feed.table) WHERE id = 1")

                let insert = try Transaction.read(from: stream)
                let relation = try #require(insert.relations.first)
                #expect(relation.namespace == "public")
                #expect(relation.name == feed.table)
                #expect(relation.columns.map(\.name) == ["id", "name", "note"])
                #expect(relation.columns.map(\.typeOID) == [20, 25, 25])
                #expect(relation.columns.map(\.isKey) == [true, false, false])
                #expect(insert.changes == [.insert(relationID: relation.id, new: [.text("1"), .text("ada"), .null])])
                #expect(insert.finalLSN == insert.commitLSN)
                #expect(insert.commitLSN < insert.endLSN)
                let commitDate = Date(postgresEpochMicroseconds: insert.commitTime)
                #expect(commitDate >= before.addingTimeInterval(-1) && commitDate <= Date().addingTimeInterval(1))

                let update = try Transaction.read(from: stream)
                #expect(update.relations.isEmpty)  // sent once per stream and table
                #expect(
                    update.changes == [
                        .update(relationID: relation.id, old: nil, new: [.text("1"), .text("ada ✓"), .text("it's")])
                    ])
                #expect(insert.endLSN <= update.commitLSN)

                let delete = try Transaction.read(from: stream)
                #expect(delete.changes == [.delete(relationID: relation.id, old: [.text("1"), .null, .null])])
                #expect(update.endLSN <= delete.commitLSN)
                #expect(update.xid != delete.xid)
            }
        }

        @Test func unchangedToastFullReplicaIdentityAndTruncate() throws {
            try Feed.with("toast") { feed, connection in
                let stream = try feed.stream()
                defer { stream.close() }

                // 8 KB of md5 hex: stored out of line (TOAST), so an update that leaves it alone does not resend it.
                try connection.simpleQuery(
                    """
                    INSERT INTO \(feed.table) (id, name, note)
                    SELECT 7, 'big', string_agg(md5(i::text), '') FROM generate_series(1, 256) AS i
                    """)
                try connection.simpleQuery("UPDATE \(feed.table) SET name = 'renamed' WHERE id = 7")
                try connection.simpleQuery("ALTER TABLE \(feed.table) REPLICA IDENTITY FULL")
                try connection.simpleQuery("UPDATE \(feed.table) SET name = 'full' WHERE id = 7")
                try connection.simpleQuery("TRUNCATE \(feed.table)")

                let insert = try Transaction.read(from: stream)
                let relationID = try #require(insert.relations.first?.id)
                guard case .insert(_, let inserted) = try #require(insert.changes.first) else {
                    Issue.record("expected an insert, got \(insert.changes)")
                    return
                }
                let big = try #require(inserted[2].text)
                #expect(big.count == 256 * 32)

                let update = try Transaction.read(from: stream)
                #expect(
                    update.changes == [
                        .update(relationID: relationID, old: nil, new: [.text("7"), .text("renamed"), .unchangedToast])
                    ])

                let full = try Transaction.read(from: stream)
                guard case .update(relationID, let old?, let new) = try #require(full.changes.first) else {
                    Issue.record("expected an update with the old row, got \(full.changes)")
                    return
                }
                #expect(old.prefix(2) == [.text("7"), .text("renamed")])
                #expect(new.prefix(2) == [.text("7"), .text("full")])

                let truncate = try Transaction.read(from: stream)
                #expect(truncate.changes == [.truncate(relationIDs: [relationID])])
            }
        }

        @Test func keepaliveOnRequestAndStatusUpdateMovesTheConfirmedPosition() throws {
            try Feed.with("keepalive") { feed, connection in
                let stream = try feed.stream()
                defer { stream.close() }

                try connection.simpleQuery("INSERT INTO \(feed.table) (id, name) VALUES (1, 'a')")
                let transaction = try Transaction.read(from: stream)
                // Flushed 0/0 confirms nothing; replyRequested makes the server answer with a keepalive.
                try stream.sendStatus(flushed: .zero, replyRequested: true)
                let walEnd = try Self.keepalive(from: stream)
                #expect(walEnd >= transaction.endLSN)

                try stream.sendStatus(flushed: transaction.endLSN)
                let status = try Self.waitForSlot(feed, on: connection) { $0.confirmedFlushLSN == transaction.endLSN }
                #expect(status.isActive)
                #expect((status.lagBytes ?? -1) >= 0)

                try stream.sendStatus(flushed: walEnd)
                _ = try Self.waitForSlot(feed, on: connection) { $0.confirmedFlushLSN == walEnd }
            }
        }

        /// A replication connection is not bound by `statement_timeout`, and `next` repeats the
        /// last status update on its own, so an idle consumer is not cut off by `wal_sender_timeout`.
        @Test func idleStreamOutlivesStatementTimeoutAndRepeatsItsStatus() throws {
            try Feed.with("idle") { feed, connection in
                let stream = try LogicalReplicationStream(
                    configuration: PostgresServerTests.configuration(statementTimeout: .milliseconds(200)),
                    slot: feed.slot,
                    publication: feed.publication, statusInterval: .milliseconds(100),
                    logger: PostgresServerTests.logger)
                defer { stream.close() }

                let start = ContinuousClock.now
                var replyTimes: Set<String> = []
                while replyTimes.count < 4 {
                    #expect(ContinuousClock.now - start < .seconds(10), "no status updates from an idle stream")
                    guard ContinuousClock.now - start < .seconds(10) else { return }
                    _ = try stream.next(timeout: .milliseconds(50))
                    let reply = try connection.simpleQuery(
                        """
                        SELECT reply_time::text AS reply_time FROM pg_stat_replication
                        WHERE pid = (SELECT active_pid FROM pg_replication_slots WHERE slot_name = '\(feed.slot)')
                        """
                    ).rows.first
                    if let time = try reply?.decodeIfPresent("reply_time", as: String.self) { replyTimes.insert(time) }
                }
                #expect(ContinuousClock.now - start > .milliseconds(200))
                try connection.simpleQuery("INSERT INTO \(feed.table) (id, name) VALUES (1, 'still here')")
                #expect(try Transaction.read(from: stream).insertedIDs == ["1"])
            }
        }

        @Test func reconnectResendsOnlyWhatWasNotConfirmed() throws {
            try Feed.with("resume") { feed, connection in
                for id in 1...2 {
                    try connection.simpleQuery("INSERT INTO \(feed.table) (id, name) VALUES (\(id), 'r')")
                }

                let first = try feed.stream()
                let one = try Transaction.read(from: first)
                #expect(one.insertedIDs == ["1"])
                try first.sendStatus(flushed: one.endLSN)
                let two = try Transaction.read(from: first)
                #expect(two.insertedIDs == ["2"])
                first.close()  // 2 was received but never confirmed
                #expect(
                    try LogicalReplicationSetup.slotStatus(named: feed.slot, on: connection)?.confirmedFlushLSN
                        == one.endLSN)

                try connection.simpleQuery("INSERT INTO \(feed.table) (id, name) VALUES (3, 'r')")
                let second = try feed.stream()
                let again = try Transaction.read(from: second)
                #expect(again.insertedIDs == ["2"])
                #expect(again.endLSN == two.endLSN)
                let three = try Transaction.read(from: second)
                #expect(three.insertedIDs == ["3"])
                try second.sendStatus(flushed: three.endLSN)
                second.close()

                // Asking for an earlier start does not go back past the confirmed position either.
                try connection.simpleQuery("INSERT INTO \(feed.table) (id, name) VALUES (4, 'r')")
                let third = try feed.stream(startLSN: one.endLSN)
                defer { third.close() }
                #expect(try Transaction.read(from: third).insertedIDs == ["4"])
            }
        }

        @Test func secondStreamOnASlotIsObjectInUseUntilTheFirstCloses() throws {
            try Feed.with("inuse") { feed, connection in
                let first = try feed.stream()
                defer { first.close() }

                let error = #expect(throws: PostgresError.self) { _ = try feed.stream() }
                #expect(error?.isObjectInUse == true)
                #expect(error?.sqlState == .objectInUse)
                #expect(error?.isUnavailable == false)
                #expect(try LogicalReplicationSetup.slotStatus(named: feed.slot, on: connection)?.isActive == true)
                #expect(first.isOpen)

                first.close()
                #expect(!first.isOpen)
                #expect(try LogicalReplicationSetup.slotStatus(named: feed.slot, on: connection)?.isActive == false)
                let second = try feed.stream()
                defer { second.close() }
                try connection.simpleQuery("INSERT INTO \(feed.table) (id, name) VALUES (1, 'taken over')")
                #expect(try Transaction.read(from: second).insertedIDs == ["1"])

                let closed = #expect(throws: PostgresError.self) { _ = try first.next(timeout: .zero) }
                #expect(closed?.kind == .connectionUnavailable)
                #expect(throws: PostgresError.self) { try first.sendStatus(flushed: .zero) }
            }
        }

        @Test func terminatedServerProcessEndsTheStreamWithAnError() throws {
            try Feed.with("terminate") { feed, connection in
                let stream = try feed.stream()
                defer { stream.close() }

                let terminated = try connection.simpleQuery(
                    "SELECT pg_terminate_backend(active_pid) AS done FROM pg_replication_slots WHERE slot_name = '\(feed.slot)'"
                )
                #expect(try terminated.rows.first?.decode("done", as: Bool.self) == true)
                let (error, elapsed) = PostgresServerTests.elapsed {
                    #expect(throws: PostgresError.self) {
                        while try stream.next(timeout: .seconds(10)) != nil {}
                        throw TestFailure()  // ten seconds without a message: it hangs
                    }
                }
                #expect(error?.kind == .connectionUnavailable)
                #expect(error?.isUnavailable == true)
                #expect(elapsed < .seconds(5))
                #expect(!stream.isOpen)
            }
        }

        @Test func missingPublicationIsReportedAtTheFirstChange() throws {
            try Feed.with("nopub") { feed, connection in
                let stream = try LogicalReplicationStream(
                    configuration: PostgresServerTests.configuration(), slot: feed.slot,
                    publication: "\(feed.table)_missing",
                    logger: PostgresServerTests.logger)
                defer { stream.close() }

                try connection.simpleQuery("INSERT INTO \(feed.table) (id, name) VALUES (1, 'x')")
                let error = #expect(throws: PostgresError.self) {
                    let deadline = ContinuousClock.now + .seconds(10)
                    while ContinuousClock.now < deadline { _ = try stream.next(timeout: deadline - .now) }
                }
                #expect(error?.sqlState == .undefinedObject)
                #expect(!stream.isOpen)
            }
        }

        @Test func unreachableServerAndUnknownSlotFailAtOnce() throws {
            try TestEnvironment.requirePostgres()
            let nowhere = try PostgresServerTests.configuration(url: "postgres://postgres@127.0.0.1:1/profiles")
            let unreachable = #expect(throws: PostgresError.self) {
                _ = try LogicalReplicationStream(
                    configuration: nowhere, slot: "s", publication: "p", logger: PostgresServerTests.logger)
            }
            #expect(unreachable?.kind == .connectionUnavailable)

            let unknown = #expect(throws: PostgresError.self) {
                _ = try LogicalReplicationStream(
                    configuration: PostgresServerTests.configuration(), slot: "feedwire_no_such_slot", publication: "p",
                    logger: PostgresServerTests.logger)
            }
            #expect(unknown?.sqlState == .undefinedObject)
        }

        /// Stops the whole server while a consumer streams: the stream ends with an error, it
        /// does not hang, and the server's shutdown does not wait on the stream.
        @Test func stoppedServerEndsTheStreamWithAnError() throws {
            try Feed.with("stop") { feed, connection in
                let stream = try feed.stream()
                defer { stream.close() }
                try connection.simpleQuery("INSERT INTO \(feed.table) (id, name) VALUES (1, 'x')")
                let transaction = try Transaction.read(from: stream)
                try stream.sendStatus(flushed: transaction.endLSN)

                let stopStatus = ExitStatus()
                let stopped = DispatchSemaphore(value: 0)
                Thread.detachNewThread {
                    stopStatus.value.withLock { $0 = try? PostgresServerTests.deps("stop-postgres") }
                    stopped.signal()
                }
                defer { _ = try? PostgresServerTests.deps("start-postgres") }

                // A consumer's loop: answer keepalives (shutdown asks for one) until the stream ends.
                let (error, elapsed) = PostgresServerTests.elapsed {
                    #expect(throws: PostgresError.self) {
                        let deadline = ContinuousClock.now + .seconds(20)
                        while ContinuousClock.now < deadline {
                            if case .keepalive(let walEnd, _, true)? = try stream.next(timeout: .seconds(1)) {
                                try stream.sendStatus(flushed: walEnd)
                            }
                        }
                    }
                }
                #expect(error?.kind == .connectionUnavailable)
                #expect(elapsed < .seconds(15))
                #expect(stopped.wait(timeout: .now() + 30) == .success)
                #expect(stopStatus.value.withLock { $0 } == 0)
            }
        }
    }
}

extension PostgresServerTests.LogicalReplicationStreamTests {
    /// A script's exit status, set on another thread.
    final class ExitStatus: Sendable {
        let value = Mutex<Int32?>(nil)
    }

    /// Waits (up to 10 s) for a keepalive and returns its WAL end.
    static func keepalive(from stream: LogicalReplicationStream) throws -> LSN {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if case .keepalive(let walEnd, _, _)? = try stream.next(timeout: deadline - .now) { return walEnd }
        }
        throw TestFailure()
    }

    /// Polls `pg_replication_slots` (up to 10 s) until `condition` holds: the server applies a
    /// status update when it reads it, after `sendStatus` returns.
    static func waitForSlot(
        _ feed: PostgresServerTests.Feed, on connection: PostgresConnection,
        until condition: (LogicalReplicationSetup.SlotStatus) -> Bool
    ) throws -> LogicalReplicationSetup.SlotStatus {
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            let status = try #require(try LogicalReplicationSetup.slotStatus(named: feed.slot, on: connection))
            if condition(status) { return status }
            guard ContinuousClock.now < deadline else {
                Issue.record("slot status never matched: \(status)")
                throw TestFailure()
            }
            PostgresServerTests.sleep(.milliseconds(10))
        }
    }
}

extension PostgresServerTests {
    /// A throwaway table, a publication of it and a pgoutput slot, named `feedwire_<test>_<random>`.
    struct Feed {
        let table: String
        var publication: String { "\(table)_pub" }
        var slot: String { "\(table)_slot" }

        init(_ test: String) {
            table = "feedwire_\(test)_\(UInt32.random(in: 0...UInt32.max))"
        }

        /// Runs `body` with a new feed made on `connection`, then drops both.
        static func with(_ test: String, _ body: (Feed, PostgresConnection) throws -> Void) throws {
            let feed = Feed(test)
            let connection = try PostgresServerTests.connection()
            defer {
                connection.close()
                feed.drop()
            }
            try feed.create(on: connection)
            try body(feed, connection)
        }

        func create(on connection: PostgresConnection) throws {
            try connection.simpleQuery("CREATE TABLE \(table) (id BIGINT PRIMARY KEY, name TEXT NOT NULL, note TEXT)")
            #expect(try LogicalReplicationSetup.ensurePublication(named: publication, tables: [table], on: connection))
            #expect(try LogicalReplicationSetup.ensureSlot(named: slot, on: connection))
        }

        func stream(startLSN: LSN = .zero) throws -> LogicalReplicationStream {
            try LogicalReplicationStream(
                configuration: PostgresServerTests.configuration(), slot: slot, publication: publication,
                startLSN: startLSN, logger: PostgresServerTests.logger)
        }

        /// Drops the slot, publication and table, on a connection of its own.
        func drop() {
            guard let connection = try? PostgresServerTests.connection() else { return }
            defer { connection.close() }
            // A stream's server process may still be letting go of the slot.
            let deadline = ContinuousClock.now + .seconds(10)
            while (try? LogicalReplicationSetup.dropSlot(named: slot, on: connection)) == nil,
                ContinuousClock.now < deadline
            {
                PostgresServerTests.sleep(.milliseconds(20))
            }
            _ = try? connection.simpleQuery("DROP PUBLICATION IF EXISTS \(publication)")
            _ = try? connection.simpleQuery("DROP TABLE IF EXISTS \(table)")
        }
    }

    /// One decoded transaction: begin, the relations and changes in between, commit.
    struct Transaction {
        var finalLSN = LSN.zero
        var xid: UInt32 = 0
        var relations: [PgOutputRelation] = []
        var changes: [PgOutputMessage] = []
        var commitLSN = LSN.zero
        var endLSN = LSN.zero
        var commitTime: Int64 = 0

        /// The first column of each inserted row.
        var insertedIDs: [String] {
            changes.compactMap { if case .insert(_, let new) = $0 { new.first?.text } else { nil } }
        }

        /// Reads the next whole transaction (up to 10 s), skipping keepalives.
        static func read(from stream: LogicalReplicationStream) throws -> Transaction {
            let deadline = ContinuousClock.now + .seconds(10)
            var transaction: Transaction?
            while ContinuousClock.now < deadline {
                guard case .walData(_, _, _, let payload)? = try stream.next(timeout: deadline - .now) else { continue }
                switch try PgOutputDecoder.decode(payload) {
                case .begin(let finalLSN, _, let xid):
                    #expect(transaction == nil, "begin inside a transaction")
                    transaction = Transaction(finalLSN: finalLSN, xid: xid)
                case .commit(let commitLSN, let endLSN, let commitTime):
                    guard var finished = transaction else {
                        Issue.record("commit without begin")
                        throw TestFailure()
                    }
                    finished.commitLSN = commitLSN
                    finished.endLSN = endLSN
                    finished.commitTime = commitTime
                    return finished
                case .relation(let relation):
                    transaction?.relations.append(relation)
                case let change:
                    transaction?.changes.append(change)
                }
            }
            Issue.record("no whole transaction within 10 s")
            throw TestFailure()
        }
    }
}
