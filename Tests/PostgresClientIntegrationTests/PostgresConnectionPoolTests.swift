import Dispatch
import Foundation
import PostgresClient
import Synchronization
import TestSupport
import Testing

extension PostgresServerTests {
    /// The workers' shared connections: many threads, at most `size` sessions on the server.
    @Suite struct PostgresConnectionPoolTests {
        static let select = PostgresStatement(name: "pool_select", sql: "SELECT $1::int + 1 AS n", isIdempotent: true)

        static func pool(size: Int, applicationName: String) throws -> PostgresConnectionPool {
            try TestEnvironment.requirePostgres()
            let configuration = try PostgresConfiguration(
                url: TestEnvironment.databaseURL, applicationName: applicationName, statementTimeout: .seconds(5),
                lockTimeout: .seconds(2))
            return PostgresConnectionPool(
                size: size, configuration: configuration, statements: [select], health: PostgresServerHealth(),
                logger: PostgresServerTests.logger)
        }

        @Test func sixteenThreadsShareFourSessions() throws {
            let pool = try Self.pool(size: 4, applicationName: "pool-test-sixteen")
            defer { pool.close() }
            let wrong = Atomic<Int>(0)
            let failed = Atomic<Int>(0)
            DispatchQueue.concurrentPerform(iterations: 16) { thread in
                for i in 0..<50 {
                    do {
                        let n = try pool.withConnection { try $0.execute(Self.select, [thread * 1000 + i]).rows.first?.decode("n", as: Int.self) }
                        if n != thread * 1000 + i + 1 { wrong.add(1, ordering: .relaxed) }
                    } catch {
                        failed.add(1, ordering: .relaxed)
                    }
                }
            }
            #expect(wrong.load(ordering: .relaxed) == 0)
            #expect(failed.load(ordering: .relaxed) == 0)
            #expect(pool.opened <= 4)
            let sessions = try pool.withConnection {
                try $0.simpleQuery("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'pool-test-sixteen'")
                    .rows.first?.decode("n", as: Int.self)
            }
            #expect(sessions == pool.opened)
        }

        @Test func aStalledServerRefusesBorrowersBeyondThePoolAtOnce() throws {
            let pool = try Self.pool(size: 1, applicationName: "pool-test-stall")
            defer { pool.close() }
            let holding = DispatchSemaphore(value: 0)
            let done = DispatchSemaphore(value: 0)
            // One borrower sits on the only connection in a long statement; nothing finishes.
            Thread {
                _ = try? pool.withConnection { connection in
                    holding.signal()
                    return try connection.simpleQuery("SELECT pg_sleep(0.5)")
                }
                done.signal()
            }.start()
            holding.wait()
            let started = ContinuousClock.now
            #expect(throws: PostgresError.self) { try pool.withConnection { _ in 1 } }
            // Refused after the stall window (50 ms), not after the statement (500 ms).
            #expect(ContinuousClock.now - started < .milliseconds(400))
            #expect(pool.refused == 1)
            done.wait()
            #expect(try pool.withConnection { try $0.execute(Self.select, [1]).rows.first?.decode("n", as: Int.self) } == 2)
        }
    }
}
