import Foundation
import PostgresClient
import Testing
import TestSupport

@testable import ProfileService

/// The database enforces what the cache relies on (migrations/0003, docs/design.md §2.5): a
/// version names one content of an id over its whole history, whoever writes. Each statement is
/// what an operator at a psql prompt would type.
@Suite(.serialized) struct VersionRulesTests {
    let backends: IntegrationBackends

    init() throws {
        backends = try IntegrationBackends()
    }

    private func sql(_ text: String) throws {
        try backends.connection.simpleQuery(text)
    }

    private func row(_ id: Int64) throws -> Profile? {
        try backends.store.profile(id: id)
    }

    @Test func anUpdateThatLeavesTheVersionRaisesItAndItsTimestamp() throws {
        let seeded = try backends.seed()
        Thread.sleep(forTimeInterval: 0.01)
        try sql("UPDATE user_profiles SET display_name = 'psql edit' WHERE id = \(seeded.id)")
        let edited = try #require(try row(seeded.id))
        #expect(edited.version == 2)
        #expect(edited.displayName == "psql edit")
        #expect(edited.updatedAt != seeded.updatedAt, "updated_at follows the change")
    }

    @Test func aVersionNeverGoesDown() throws {
        let seeded = try backends.seed()
        try sql("UPDATE user_profiles SET display_name = 'two' WHERE id = \(seeded.id)")
        try sql("UPDATE user_profiles SET display_name = 'three' WHERE id = \(seeded.id)")
        try sql("UPDATE user_profiles SET version = 1 WHERE id = \(seeded.id)")
        #expect(try row(seeded.id)?.version == 3, "the same content keeps its version")
        try sql("UPDATE user_profiles SET version = 1, display_name = 'four' WHERE id = \(seeded.id)")
        #expect(try row(seeded.id)?.version == 4, "a new content gets a higher version")
        try sql("UPDATE user_profiles SET display_name = display_name WHERE id = \(seeded.id)")
        #expect(try row(seeded.id)?.version == 4, "no change, no new version")
    }

    @Test func theServicesUpdateRaisesTheVersionByExactlyOne() throws {
        let seeded = try backends.seed()
        guard case .updated(let updated) = try backends.store.updateDisplayName(id: seeded.id, to: "Ada", expectedVersion: 1)
        else {
            Issue.record("the optimistic update did not apply")
            return
        }
        #expect(updated.version == 2)
        #expect(try row(seeded.id)?.version == 2)
    }

    @Test func anIDDeletedAndCreatedAgainContinuesItsNumbering() throws {
        let seeded = try backends.seed()
        try sql("UPDATE user_profiles SET display_name = 'v2' WHERE id = \(seeded.id)")
        try sql(
            "BEGIN; DELETE FROM user_profiles WHERE id = \(seeded.id); "
                + "INSERT INTO user_profiles (id, username, display_name) VALUES (\(seeded.id), 'u\(seeded.id)', 'reborn'); COMMIT")
        #expect(try row(seeded.id)?.version == 3, "a DELETE and INSERT in one transaction")

        try sql("DELETE FROM user_profiles WHERE id = \(seeded.id)")
        // The service's own create answers the version the row really got.
        let created = try backends.store.create(id: seeded.id, username: "u\(seeded.id)", displayName: "again")
        #expect(created.version == 4, "a create after a DELETE continues above the last version")
        #expect(try row(seeded.id)?.version == 4)
        try sql("DELETE FROM user_profiles WHERE id = \(seeded.id)")
    }

    @Test func anIDCannotChange() throws {
        let seeded = try backends.seed()
        #expect(throws: PostgresError.self) {
            try sql("UPDATE user_profiles SET id = id + 1 WHERE id = \(seeded.id)")
        }
        #expect(try row(seeded.id)?.version == 1)
    }
}
