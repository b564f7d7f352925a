import Dispatch
import Foundation
import Glibc
import PostgresClient
import Synchronization
import TestSupport
import Testing

extension PostgresServerTests {
    /// Stops and starts the test cluster with `scripts/deps.sh` (honouring `PROFILE_PG_PORT` and
    /// `PROFILE_STATE_DIR`), so it runs serialized with every other server test.
    @Suite struct PostgresRestartTests {
        @Test func callsFailFastWhileDownAndRecoverWithStatementsPreparedAgain() throws {
            let (table, connection) = try PostgresServerTests.tableWithAlice("restart")
            defer { connection.close(); table.drop() }
            let pidBefore = try PostgresServerTests.backendPID(connection)

            #expect(try PostgresServerTests.deps("stop-postgres") == 0)
            var restarted = false
            defer { if !restarted { _ = try? PostgresServerTests.deps("start-postgres") } }

            // The first call finds the session dead, tries one reconnect (refused), and fails.
            let (first, firstElapsed) = PostgresServerTests.elapsed {
                #expect(throws: PostgresError.self) { try connection.execute(table.select, [1]) }
            }
            #expect(first?.kind == .connectionUnavailable)
            #expect(first?.isUnavailable == true)
            #expect(firstElapsed < .milliseconds(500))
            // Later calls fail fast: in backoff, or refused at once.
            for _ in 0..<20 {
                let (error, elapsed) = PostgresServerTests.elapsed {
                    #expect(throws: PostgresError.self) { try connection.execute(table.updateBio, [1, "down"]) }
                }
                #expect(error?.kind == .connectionUnavailable)
                #expect(elapsed < .milliseconds(100))
                PostgresServerTests.sleep(.milliseconds(20))
            }
            #expect(!connection.checkHealth())
            #expect(!connection.isConnected)

            #expect(try PostgresServerTests.deps("start-postgres") == 0)
            restarted = true
            // The connection reconnects once its backoff (at most 2 s) has passed: until then a
            // query fails fast; then it succeeds on a new session with its statements prepared again.
            var rows: [PostgresRow] = []
            #expect(Eventually.wait(timeout: .seconds(5)) {
                guard let result = try? connection.execute(table.select, [1]) else { return false }
                rows = result.rows
                return true
            }, "no reconnection within 5 s of the restart")
            let row = try #require(rows.first)
            #expect(try row.decode("username", as: String.self) == "alice")
            #expect(try connection.execute(table.updateBio, [1, "back"]).affectedRows == 1)
            #expect(try PostgresServerTests.backendPID(connection) != pidBefore)
            #expect(try preparedNames(connection) == ["insert_person", "select_person", "update_bio"])
            #expect(connection.checkHealth())
        }

        @Test func idleSessionAcrossARestartIsReplacedTransparentlyForReads() throws {
            let (table, connection) = try PostgresServerTests.tableWithAlice("idle_restart")
            defer { connection.close(); table.drop() }

            #expect(try PostgresServerTests.deps("stop-postgres") == 0)
            #expect(try PostgresServerTests.deps("start-postgres") == 0)

            // The idle session died with the old server; the idempotent select reconnects and retries.
            #expect(try connection.execute(table.select, [1]).rows.count == 1)
            #expect(try preparedNames(connection) == ["insert_person", "select_person", "update_bio"])
        }

        /// A write is never retried (it may have committed), so it must not be the call that finds
        /// out the session died while idle: the connection notices the server's goodbye on the
        /// socket and reconnects before sending it (issue 21: a PUT answered 503 after a restart).
        @Test func aWriteOnASessionThatDiedWhileIdleReconnectsFirst() throws {
            let (table, connection) = try PostgresServerTests.tableWithAlice("idle_write")
            defer { connection.close(); table.drop() }
            let pidBefore = try PostgresServerTests.backendPID(connection)

            #expect(try PostgresServerTests.deps("stop-postgres") == 0)
            #expect(try PostgresServerTests.deps("start-postgres") == 0)

            #expect(try connection.execute(table.updateBio, [1, "after the restart"]).affectedRows == 1)
            #expect(try PostgresServerTests.backendPID(connection) != pidBefore)
        }

        /// A server that stops answering (SIGSTOP: the connections stay up): a read gives up once no
        /// connection has heard from it for the health's silence limit, a write waits its deadline
        /// (statement_timeout + 1 s: giving up sooner would leave its outcome unknown for nothing);
        /// the shared health marks the server down, and a connection with an idle session fails
        /// fast instead of waiting a deadline of its own.
        @Test func aStatementToAFrozenServerEndsAtItsDeadlineAndTheOthersFailFast() throws {
            let table = Table("frozen")
            let configuration = try PostgresConfiguration(
                url: TestEnvironment.databaseURL, statementTimeout: .milliseconds(1000))
            let health = PostgresServerHealth(silenceLimit: .milliseconds(400))
            let reader = PostgresConnection(
                configuration: configuration, statements: table.statements, health: health, logger: PostgresServerTests.logger)
            let idle = PostgresConnection(
                configuration: configuration, statements: table.statements, health: health, logger: PostgresServerTests.logger)
            defer { reader.close(); idle.close(); table.drop() }
            try table.create(on: reader)
            _ = try reader.execute(table.insert, [1, "alice", nil, 1, true])
            _ = try idle.execute(table.select, [1])
            // The writer, on a thread of its own: connected and prepared before the freeze.
            let (statements, select, updateBio) = (table.statements, table.select, table.updateBio)
            let writeTook = Mutex<Duration?>(nil)
            let (ready, go) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
            let write = TestThread {
                let writer = PostgresConnection(
                    configuration: configuration, statements: statements, health: health, logger: PostgresServerTests.logger)
                defer { writer.close() }
                _ = try? writer.execute(select, [1])
                _ = try? writer.execute(updateBio, [1, "warm"])
                ready.signal()
                go.wait()
                let (_, elapsed) = PostgresServerTests.elapsed {
                    #expect(throws: PostgresError.self) { try writer.execute(updateBio, [1, "frozen"]) }
                }
                writeTook.withLock { $0 = elapsed }
            }
            ready.wait()

            let pids = try TestEnvironment.postgresPIDs()
            var frozen: [pid_t] = []
            defer { for pid in frozen { kill(pid, SIGCONT) } }
            for pid in pids {
                try TestEnvironment.freeze(pid)
                frozen.append(pid)
            }
            go.signal()
            let (error, elapsed) = PostgresServerTests.elapsed {
                #expect(throws: PostgresError.self) { try reader.execute(table.select, [1]) }
            }
            write.join()
            let written = try #require(writeTook.withLock { $0 })
            print("frozen server: the read failed after \(elapsed), the write after \(written) (deadline \(configuration.responseDeadline))")
            #expect(error?.kind == .connectionUnavailable)
            #expect(elapsed >= health.silenceLimit, "the read waited for its answer first")
            #expect(elapsed < configuration.responseDeadline, "and gave up before its deadline: nobody hears from the server")
            #expect(written >= configuration.responseDeadline, "the write waited its deadline")
            #expect(written < configuration.responseDeadline + .seconds(2), "and no longer")
            #expect(health.isDown)
            let (_, failedFast) = PostgresServerTests.elapsed {
                #expect(throws: PostgresError.self) { try idle.execute(table.select, [1]) }
            }
            #expect(failedFast < .milliseconds(500), "an idle session does not wait a deadline of its own")

            for pid in frozen { kill(pid, SIGCONT) }
            frozen = []
            #expect(Eventually.wait(timeout: .seconds(10)) { (try? idle.execute(table.select, [1]))?.rows.count == 1 })
            #expect(Eventually.wait(timeout: .seconds(10)) { (try? reader.execute(table.select, [1]))?.rows.count == 1 })
        }

        /// Connections sharing one ``PostgresServerHealth``: while the server is down they fail at
        /// once; once one of them connects again, every other connects on its next call instead
        /// of failing until a backoff of its own runs out.
        @Test func connectionsSharingHealthComeBackTogether() throws {
            let (table, setup) = try PostgresServerTests.tableWithAlice("shared_health")
            defer { setup.close(); table.drop() }
            let health = PostgresServerHealth()
            let connections = try (0..<4).map { _ in
                PostgresConnection(
                    configuration: try PostgresServerTests.configuration(), statements: table.statements,
                    health: health, logger: PostgresServerTests.logger)
            }
            defer { for connection in connections { connection.close() } }
            for connection in connections { try connection.connect() }

            #expect(try PostgresServerTests.deps("stop-postgres") == 0)
            var restarted = false
            defer { if !restarted { _ = try? PostgresServerTests.deps("start-postgres") } }
            for connection in connections {
                let (error, elapsed) = PostgresServerTests.elapsed {
                    #expect(throws: PostgresError.self) { try connection.execute(table.select, [1]) }
                }
                #expect(error?.kind == .connectionUnavailable)
                #expect(elapsed < .milliseconds(500))
            }
            #expect(health.isDown)

            #expect(try PostgresServerTests.deps("start-postgres") == 0)
            restarted = true
            let clock = ContinuousClock()
            let started = clock.now
            var back: Duration?
            while clock.now - started < .seconds(5) {
                if (try? connections[0].execute(table.select, [1]))?.rows.count == 1 {
                    back = clock.now - started
                    break
                }
                PostgresServerTests.sleep(.milliseconds(10))
            }
            print("shared health: first connection back \(back.map { "\($0)" } ?? "never") after PostgreSQL started")
            #expect(back != nil && back! < .seconds(1), "the backoff is at most 250 ms")
            #expect(!health.isDown)
            for connection in connections.dropFirst() {
                #expect(try connection.execute(table.select, [1]).rows.count == 1, "no backoff of its own")
            }
        }


        private func preparedNames(_ connection: PostgresConnection) throws -> [String] {
            try connection.simpleQuery("SELECT name FROM pg_prepared_statements ORDER BY name")
                .rows.map { try $0.decode("name", as: String.self) }
        }
    }
}
