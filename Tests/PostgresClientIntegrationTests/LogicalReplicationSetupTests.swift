import Foundation
import PostgresClient
import Synchronization
import TestSupport
import Testing

extension PostgresServerTests {
    @Suite struct LogicalReplicationSetupTests {
        @Test func ensureSlotIsIdempotentAndDropSlotToo() throws {
            let slot = "feedwire_setup_\(UInt32.random(in: 0...UInt32.max))"
            let connection = try PostgresServerTests.connection()
            defer {
                _ = try? LogicalReplicationSetup.dropSlot(named: slot, on: connection)
                connection.close()
            }
            #expect(try LogicalReplicationSetup.slotStatus(named: slot, on: connection) == nil)
            #expect(try LogicalReplicationSetup.ensureSlot(named: slot, on: connection))
            #expect(try !LogicalReplicationSetup.ensureSlot(named: slot, on: connection))

            let status = try #require(try LogicalReplicationSetup.slotStatus(named: slot, on: connection))
            #expect(status.confirmedFlushLSN != nil)
            #expect(!status.isActive)
            #expect(status.walStatus == "reserved")
            #expect(!status.isLost)
            #expect((status.lagBytes ?? -1) >= 0)
            let plugin = try connection.simpleQuery(
                "SELECT plugin, slot_type FROM pg_replication_slots WHERE slot_name = '\(slot)'"
            ).rows.first
            #expect(try plugin?.decode("plugin", as: String.self) == "pgoutput")
            #expect(try plugin?.decode("slot_type", as: String.self) == "logical")

            // WAL written after the slot's position counts as lag (transactional: the commit writes it out).
            try connection.simpleQuery("SELECT pg_logical_emit_message(true, 'feedwire', repeat('x', 10000))")
            let later = try #require(try LogicalReplicationSetup.slotStatus(named: slot, on: connection))
            #expect((later.lagBytes ?? 0) >= 10_000)
            #expect(later.confirmedFlushLSN == status.confirmedFlushLSN)

            #expect(try LogicalReplicationSetup.dropSlot(named: slot, on: connection))
            #expect(try !LogicalReplicationSetup.dropSlot(named: slot, on: connection))
            #expect(try LogicalReplicationSetup.slotStatus(named: slot, on: connection) == nil)
        }

        @Test func twoProcessesRacingToCreateTheSlotBothSucceed() throws {
            try TestEnvironment.requirePostgres()
            let slot = "feedwire_race_\(UInt32.random(in: 0...UInt32.max))"
            defer {
                if let connection = try? PostgresServerTests.connection() {
                    _ = try? LogicalReplicationSetup.dropSlot(named: slot, on: connection)
                    connection.close()
                }
            }
            let outcomes = Outcomes()
            let done = DispatchSemaphore(value: 0)
            for _ in 0..<2 {
                Thread.detachNewThread {
                    let outcome: Result<Bool, PostgresError>
                    do {
                        let connection = try PostgresServerTests.connection()
                        defer { connection.close() }
                        outcome = .success(try LogicalReplicationSetup.ensureSlot(named: slot, on: connection))
                    } catch {
                        outcome = .failure(error as? PostgresError ?? PostgresError(kind: .other, message: "\(error)"))
                    }
                    outcomes.value.withLock { $0.append(outcome) }
                    done.signal()
                }
            }
            for _ in 0..<2 { #expect(done.wait(timeout: .now() + 30) == .success) }
            let created = try outcomes.value.withLock { try $0.map { try $0.get() } }
            #expect(created.sorted { !$0 && $1 } == [false, true])
        }

        @Test func aPhysicalSlotOfThatNameIsNotMistakenForOurs() throws {
            let slot = "feedwire_physical_\(UInt32.random(in: 0...UInt32.max))"
            let connection = try PostgresServerTests.connection()
            defer {
                _ = try? LogicalReplicationSetup.dropSlot(named: slot, on: connection)
                connection.close()
            }
            try connection.simpleQuery("SELECT pg_create_physical_replication_slot('\(slot)')")
            let error = #expect(throws: PostgresError.self) {
                _ = try LogicalReplicationSetup.ensureSlot(named: slot, on: connection)
            }
            #expect(error?.sqlState == .duplicateObject)
        }

        @Test func ensurePublicationIsIdempotent() throws {
            let table = "feedwire_pub_\(UInt32.random(in: 0...UInt32.max))"
            let connection = try PostgresServerTests.connection()
            defer {
                _ = try? connection.simpleQuery("DROP PUBLICATION IF EXISTS \(table)_pub")
                _ = try? connection.simpleQuery("DROP TABLE IF EXISTS \(table)")
                connection.close()
            }
            try connection.simpleQuery("CREATE TABLE \(table) (id BIGINT PRIMARY KEY)")
            #expect(
                try LogicalReplicationSetup.ensurePublication(named: "\(table)_pub", tables: [table], on: connection))
            #expect(
                try !LogicalReplicationSetup.ensurePublication(named: "\(table)_pub", tables: [table], on: connection))
            let tables = try connection.simpleQuery(
                "SELECT tablename FROM pg_publication_tables WHERE pubname = '\(table)_pub'")
            #expect(try tables.rows.map { try $0.decode("tablename", as: String.self) } == [table])

            let missing = #expect(throws: PostgresError.self) {
                _ = try LogicalReplicationSetup.ensurePublication(
                    named: "\(table)_other", tables: ["\(table)_missing"], on: connection)
            }
            #expect(missing?.sqlState == .undefinedTable)
        }

        /// Results from several threads.
        final class Outcomes: Sendable {
            let value = Mutex<[Result<Bool, PostgresError>]>([])
        }
    }
}
