import PostgresClient
import TestSupport
import Testing

extension PostgresServerTests {
    @Suite struct PostgresConnectionTests {
        @Test func connectsLazilyAndCloses() throws {
            let connection = try PostgresServerTests.connection()
            #expect(!connection.isConnected)
            try connection.connect()
            #expect(connection.isConnected)
            #expect(connection.checkHealth())
            connection.close()
            #expect(!connection.isConnected)
            #expect(!connection.checkHealth())
            let error = #expect(throws: PostgresError.self) { try connection.simpleQuery("SELECT 1") }
            #expect(error?.kind == .connectionUnavailable)
        }

        @Test func roundTripsTypedParametersRowsAndNulls() throws {
            let table = Table("roundtrip")
            let connection = try PostgresServerTests.connection(statements: table.statements)
            defer { connection.close(); table.drop() }
            try table.create(on: connection)

            let inserted = try connection.execute(
                table.insert, [Int64(1), "alice", nil, Int32(30), true])
            #expect(inserted.affectedRows == 1)
            #expect(inserted.rows.isEmpty)
            _ = try connection.execute(table.insert, [2, "bob", "likes 'quotes' \\ and ü", nil, false])

            let alice = try #require(try connection.execute(table.select, [Int64(1)]).rows.first)
            #expect(alice.columnNames == ["id", "username", "bio", "age", "active"])
            #expect(try alice.decode("id", as: Int64.self) == 1)
            #expect(try alice.decode("username", as: String.self) == "alice")
            #expect(try alice.decodeIfPresent("bio", as: String.self) == nil)
            #expect(try alice.decode("age", as: Int32.self) == 30)
            #expect(try alice.decode("active", as: Bool.self))

            let bob = try #require(try connection.execute(table.select, [2]).rows.first)
            #expect(try bob.decode("bio", as: String.self) == "likes 'quotes' \\ and ü")
            #expect(try bob.decodeIfPresent("age", as: Int.self) == nil)
            #expect(try bob.decode("active", as: Bool.self) == false)

            let updated = try connection.execute(table.updateBio, [1, "hello"])
            #expect(updated.affectedRows == 1)
            let again = try #require(try connection.execute(table.select, [1]).rows.first)
            #expect(try again.decode("bio", as: String.self) == "hello")
            #expect(try connection.execute(table.updateBio, [1, nil]).affectedRows == 1)
            #expect(try connection.execute(table.select, [1]).rows.first?.decodeIfPresent("bio", as: String.self) == nil)

            let none = try connection.execute(table.select, [99])
            #expect(none.rows.isEmpty)
            #expect(try connection.execute(table.updateBio, [99, "x"]).affectedRows == 0)

            let multi = try connection.simpleQuery("SELECT 1; SELECT id FROM \(table.name) ORDER BY id")
            #expect(try multi.rows.map { try $0.decode("id", as: Int.self) } == [1, 2])
        }

        @Test func uniqueViolationCarriesTheConstraint() throws {
            let table = Table("unique")
            let connection = try PostgresServerTests.connection(statements: table.statements)
            defer { connection.close(); table.drop() }
            try table.create(on: connection)
            _ = try connection.execute(table.insert, [1, "alice", nil, 1, true])

            let error = #expect(throws: PostgresError.self) {
                _ = try connection.execute(table.insert, [2, "alice", nil, 1, true])
            }
            #expect(error?.kind == .uniqueViolation)
            #expect(error?.sqlState == .uniqueViolation)
            #expect(error?.constraint == "\(table.name)_username_key")
            #expect(error?.statementName == "insert_person")
            #expect(error?.detail?.isEmpty == false)
            #expect(error?.isUnavailable == false)
            #expect(error.map { !"\($0)".contains("alice") } == true)
            #expect(connection.checkHealth())
        }

        @Test func checkViolation() throws {
            let table = Table("check")
            let connection = try PostgresServerTests.connection(statements: table.statements)
            defer { connection.close(); table.drop() }
            try table.create(on: connection)
            let error = #expect(throws: PostgresError.self) {
                _ = try connection.execute(table.insert, [1, "alice", nil, -1, true])
            }
            #expect(error?.kind == .checkViolation)
            #expect(error?.constraint == "\(table.name)_age_check")
        }

        @Test func statementTimeoutIsQueryCanceled() throws {
            let sleep = PostgresStatement(name: "sleep", sql: "SELECT pg_sleep(1)", isIdempotent: true)
            let connection = try PostgresServerTests.connection(statements: [sleep], statementTimeout: .milliseconds(100))
            defer { connection.close() }
            try connection.connect()
            let (error, elapsed) = PostgresServerTests.elapsed {
                #expect(throws: PostgresError.self) { try connection.execute(sleep, []) }
            }
            #expect(error?.kind == .queryCanceled)
            #expect(error?.sqlState == .queryCanceled)
            #expect(error?.isUnavailable == true)
            #expect(elapsed < .milliseconds(900))
            #expect(connection.checkHealth())
        }

        @Test func lockTimeoutIsLockNotAvailable() throws {
            let table = Table("lock")
            let holder = try PostgresServerTests.connection()
            let waiter = try PostgresServerTests.connection(statements: table.statements, lockTimeout: .milliseconds(200))
            defer { holder.close(); waiter.close(); table.drop() }
            try table.create(on: holder)
            _ = try waiter.execute(table.insert, [1, "alice", nil, 1, true])

            try holder.simpleQuery("BEGIN; SELECT * FROM \(table.name) WHERE id = 1 FOR UPDATE")
            let (error, elapsed) = PostgresServerTests.elapsed {
                #expect(throws: PostgresError.self) { try waiter.execute(table.updateBio, [1, "blocked"]) }
            }
            try holder.simpleQuery("ROLLBACK")
            #expect(error?.kind == .lockNotAvailable)
            #expect(error?.sqlState == .lockNotAvailable)
            #expect(error?.isUnavailable == true)
            #expect(elapsed < .seconds(1))
            #expect(try waiter.execute(table.updateBio, [1, "free"]).affectedRows == 1)
        }

        @Test func serializationFailureIsRetryable() throws {
            let table = Table("serialize")
            let first = try PostgresServerTests.connection(statements: table.statements)
            let second = try PostgresServerTests.connection(statements: table.statements)
            defer { first.close(); second.close(); table.drop() }
            try table.create(on: first)
            _ = try first.execute(table.insert, [1, "alice", nil, 1, true])

            try first.simpleQuery("BEGIN ISOLATION LEVEL REPEATABLE READ")
            _ = try first.execute(table.select, [1])
            _ = try second.execute(table.updateBio, [1, "concurrent"])
            let error = #expect(throws: PostgresError.self) { try first.execute(table.updateBio, [1, "mine"]) }
            try first.simpleQuery("ROLLBACK")
            #expect(error?.kind == .serializationFailure)
            #expect(error?.isRetryable == true)
        }

        @Test func catchBySQLState() throws {
            let table = Table("catch")
            let connection = try PostgresServerTests.connection(statements: table.statements)
            defer { connection.close(); table.drop() }
            try table.create(on: connection)
            _ = try connection.execute(table.insert, [1, "alice", nil, 1, true])
            do {
                _ = try connection.execute(table.insert, [1, "other", nil, 1, true])
                Issue.record("expected a unique violation")
            } catch SQLState.integrityConstraintViolation {
                // 23505 is in class 23
            }
        }

        @Test func decodingErrorNamesTheColumn() throws {
            let connection = try PostgresServerTests.connection()
            defer { connection.close() }
            let row = try #require(try connection.simpleQuery("SELECT 'secret' AS name, NULL::int AS n").rows.first)
            let mismatch = #expect(throws: PostgresDecodingError.self) { try row.decode("name", as: Int.self) }
            #expect(mismatch?.code == .typeMismatch)
            #expect(mismatch?.column == "name")
            #expect(mismatch?.index == 0)
            #expect(mismatch.map { !"\($0)".contains("secret") } == true)
            let null = #expect(throws: PostgresDecodingError.self) { try row.decode("n", as: Int.self) }
            #expect(null?.code == .missingData)
            #expect(null?.column == "n")
        }

        @Test func withTransactionCommitsAndRollsBack() throws {
            let table = Table("transaction")
            let connection = try PostgresServerTests.connection(statements: table.statements)
            defer { connection.close(); table.drop() }
            try table.create(on: connection)

            let committed = try connection.withTransaction { connection in
                try connection.execute(table.insert, [1, "alice", nil, 1, true]).affectedRows
            }
            #expect(committed == 1)
            #expect(try connection.execute(table.select, [1]).rows.count == 1)

            #expect(throws: TestFailure.self) {
                try connection.withTransaction { connection in
                    _ = try connection.execute(table.insert, [2, "bob", nil, 1, true])
                    throw TestFailure()
                }
            }
            #expect(try connection.execute(table.select, [2]).rows.isEmpty)

            // A failed statement swallowed by the body: COMMIT would silently roll back; we say so.
            let aborted = #expect(throws: PostgresError.self) {
                try connection.withTransaction { connection in
                    _ = try connection.execute(table.insert, [3, "carol", nil, 1, true])
                    _ = try? connection.execute(table.insert, [4, "carol", nil, 1, true])
                }
            }
            #expect(aborted?.sqlState == .inFailedSQLTransaction)
            #expect(try connection.execute(table.select, [3]).rows.isEmpty)
            #expect(connection.checkHealth())
        }

        @Test func missingPreparedStatementIsPreparedAgain() throws {
            let table = Table("deallocate")
            let connection = try PostgresServerTests.connection(statements: table.statements)
            defer { connection.close(); table.drop() }
            try table.create(on: connection)
            _ = try connection.execute(table.insert, [1, "alice", nil, 1, true])
            #expect(try connection.execute(table.select, [1]).rows.count == 1)

            try connection.simpleQuery("DEALLOCATE ALL")
            #expect(try connection.execute(table.select, [1]).rows.count == 1)
            try connection.simpleQuery("DEALLOCATE ALL")
            #expect(try connection.execute(table.updateBio, [1, "x"]).affectedRows == 1)
            let names = try connection.simpleQuery("SELECT name FROM pg_prepared_statements ORDER BY name")
                .rows.map { try $0.decode("name", as: String.self) }
            #expect(names == ["update_bio"])  // prepared on demand, not all at once

            // Inside a transaction the 26000 has already aborted it: it is reported, not hidden.
            try connection.simpleQuery("DEALLOCATE ALL")
            let error = #expect(throws: PostgresError.self) {
                try connection.withTransaction { connection in try connection.execute(table.select, [1]) }
            }
            #expect(error?.sqlState == .invalidSQLStatementName)
            #expect(try connection.execute(table.select, [1]).rows.count == 1)
        }

        @Test func terminatedBackendIsRetriedOnlyForIdempotentStatements() throws {
            let table = Table("terminate")
            let connection = try PostgresServerTests.connection(statements: table.statements)
            let killer = try PostgresServerTests.connection()
            defer { connection.close(); killer.close(); table.drop() }
            try table.create(on: connection)
            _ = try connection.execute(table.insert, [1, "alice", nil, 1, true])

            func terminate() throws {
                let pid = try #require(try connection.simpleQuery("SELECT pg_backend_pid() AS pid").rows.first)
                    .decode("pid", as: Int.self)
                try killer.simpleQuery("SELECT pg_terminate_backend(\(pid))")
            }

            try terminate()
            #expect(try connection.execute(table.select, [1]).rows.count == 1)  // reconnected and retried

            try terminate()
            let error = #expect(throws: PostgresError.self) { try connection.execute(table.updateBio, [1, "x"]) }
            #expect(error?.kind == .connectionUnavailable)
            #expect(error?.isUnavailable == true)
            #expect(try connection.execute(table.updateBio, [1, "x"]).affectedRows == 1)  // next call reconnects
        }

        @Test func unreachableServerFailsFastInBackoff() throws {
            let connection = PostgresConnection(
                configuration: try PostgresServerTests.configuration(url: "postgres://postgres@127.0.0.1:1/profiles"),
                statements: [], logger: PostgresServerTests.logger)
            defer { connection.close() }
            let error = #expect(throws: PostgresError.self) { try connection.connect() }
            #expect(error?.kind == .connectionUnavailable)
            let (again, elapsed) = PostgresServerTests.elapsed {
                #expect(throws: PostgresError.self) { try connection.simpleQuery("SELECT 1") }
            }
            #expect(again?.kind == .connectionUnavailable)
            #expect(elapsed < .milliseconds(20))
            #expect(!connection.checkHealth())
            #expect(!connection.isConnected)
        }
    }
}
