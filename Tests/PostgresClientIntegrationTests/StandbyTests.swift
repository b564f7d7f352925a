import Foundation
import PostgresClient
import TestSupport
import Testing

extension PostgresServerTests {
    /// The streaming standby of `scripts/deps.sh start-standby` (issue 22's read replicas), started
    /// by the test with `recovery_min_apply_delay` = 300 ms and stopped at its end: it is in
    /// recovery, refuses writes, and shows a commit of the primary late but surely. Serialized with
    /// the other server tests, since some of them restart the primary it streams from.
    ///
    /// A standby that cannot start fails the test (`#require`); nothing is skipped.
    @Suite struct StandbyTests {
        /// `PROFILE_PG_STANDBY_DELAY_MS` for the standby: its `recovery_min_apply_delay`.
        static let applyDelayMS = 300

        /// `PROFILE_PG_STANDBY_PORT`, as `scripts/deps.sh` reads it (default 55442).
        static var standbyPort: Int { Int(TestEnvironment.variable("PROFILE_PG_STANDBY_PORT") ?? "") ?? 55442 }

        static var standbyURL: String { "postgres://postgres@127.0.0.1:\(standbyPort)/profiles" }

        @Test func theStandbyIsReadOnlyAndAppliesThePrimarysCommitsLateButSurely() throws {
            let delay = "\(Self.applyDelayMS)"
            try #require(
                try TestEnvironment.deps("start-standby", environment: ["PROFILE_PG_STANDBY_DELAY_MS": delay]) == 0,
                "scripts/deps.sh start-standby failed (its messages are above; the standby's log is in the state folder's standby/postgres.log)")
            defer { #expect((try? TestEnvironment.deps("stop-standby")) == 0, "scripts/deps.sh stop-standby failed") }

            let table = Table("standby")
            let primary = try PostgresServerTests.connection(statements: table.statements)
            let standby = PostgresConnection(
                configuration: try PostgresServerTests.configuration(url: Self.standbyURL), statements: [],
                logger: PostgresServerTests.logger)
            defer { standby.close(); primary.close(); table.drop() }
            try standby.connect()

            #expect(try bool(standby, "SELECT pg_is_in_recovery() AS value"), "the standby is in recovery")
            #expect(try !bool(primary, "SELECT pg_is_in_recovery() AS value"))
            #expect(try text(standby, "SHOW recovery_min_apply_delay") == "\(delay)ms")

            try table.create(on: primary)
            #expect(
                Eventually.wait(timeout: .seconds(30), interval: .milliseconds(50)) {
                    (try? bool(standby, "SELECT to_regclass('\(table.name)') IS NOT NULL AS value")) == true
                }, "the table created on the primary reached the standby within 30 s")

            // A write on the standby: SQLSTATE 25006, read_only_sql_transaction.
            let refused = #expect(throws: PostgresError.self) {
                try standby.simpleQuery("INSERT INTO \(table.name) (id, username) VALUES (1, 'writer')")
            }
            #expect(refused?.sqlState == "25006", "\(refused.map { String(reflecting: $0) } ?? "no error")")
            #expect(refused?.kind == .other)
            #expect(try text(standby, "SELECT count(*)::text AS value FROM \(table.name)") == "0")

            // A commit is applied no sooner than its commit time plus the delay. The commit time
            // is after `sent`, so a standby read answered within the delay of `sent` must not see
            // the row; a slower round (a busy machine) proves nothing and is tried again with a
            // new row, never failed for its timing.
            var conclusive = 0
            var id = 0
            while conclusive < 3 && id < 30 {
                id += 1
                let sent = ContinuousClock.now
                _ = try primary.execute(table.insert, [id, "user\(id)", nil, 1, true])
                let visible = try text(standby, "SELECT count(*)::text AS value FROM \(table.name) WHERE id = \(id)") == "1"
                guard ContinuousClock.now - sent < .milliseconds(Self.applyDelayMS - 50) else { continue }
                conclusive += 1
                #expect(!visible, "row \(id) was visible on the standby before the apply delay had passed")
            }
            print("standby: \(conclusive) of \(id) insert-then-read rounds within the \(delay) ms delay, the row unseen in each")
            #expect(conclusive > 0, "no insert and standby read took less than the 300 ms delay in \(id) tries")

            // The last row becomes visible within seconds; the standby's replay position reaches
            // the primary's WAL position taken after that commit, and then every row is there.
            #expect(
                Eventually.wait(timeout: .seconds(30), interval: .milliseconds(20)) {
                    (try? text(standby, "SELECT count(*)::text AS value FROM \(table.name) WHERE id = \(id)")) == "1"
                }, "row \(id) committed on the primary became visible on the standby within 30 s")
            let committed = try text(primary, "SELECT pg_current_wal_lsn()::text AS value")
            #expect(
                Eventually.wait(timeout: .seconds(30), interval: .milliseconds(50)) {
                    (try? bool(standby, "SELECT pg_last_wal_replay_lsn() >= '\(committed)'::pg_lsn AS value")) == true
                }, "the standby replayed the primary's WAL up to \(committed) within 30 s")
            #expect(
                try text(standby, "SELECT count(*)::text AS value FROM \(table.name)") == "\(id)",
                "once replayed to \(committed), every committed row is on the standby")
            #expect(try text(standby, "SELECT username AS value FROM \(table.name) WHERE id = \(id)") == "user\(id)")
        }

        private func bool(_ connection: PostgresConnection, _ sql: String) throws -> Bool {
            try #require(try connection.simpleQuery(sql).rows.first).decode("value", as: Bool.self)
        }

        private func text(_ connection: PostgresConnection, _ sql: String) throws -> String {
            let row = try #require(try connection.simpleQuery(sql).rows.first)
            return try row.decode(sql.hasPrefix("SHOW ") ? String(sql.dropFirst(5)) : "value", as: String.self)
        }
    }
}
