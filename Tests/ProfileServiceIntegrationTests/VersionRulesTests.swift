import Foundation
import PostgresClient
import Testing
import TestSupport

@testable import ProfileService

/// The database enforces what the cache relies on (migrations/0003 and 0004, docs/design.md §2.5): a
/// version names one content of an id over its whole history, whoever writes. Each statement is
/// what an operator at a psql prompt would type.
@Suite(.serialized, .requires(.postgres)) struct VersionRulesTests {
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
        try sql("UPDATE user_profiles SET version = version + 5 WHERE id = \(seeded.id)")
        #expect(try row(seeded.id)?.version == 9, "a version the statement raised stays, content changed or not")
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

    /// After a restore (docs/design.md §3.7) the floor goes above every version the database
    /// holds plus a margin, once per restore: a second instance that noticed the same restore
    /// before the raise leaves it alone, and every new version is above it.
    @Test func theFloorRaisedAfterARestoreIsAboveEveryVersionAndRaisedOncePerRestore() throws {
        let seeded = try backends.seed()
        try sql("UPDATE profile_version_floor SET floor = 0, raised_at = NULL")
        defer { _ = try? sql("UPDATE profile_version_floor SET floor = 0, raised_at = NULL") }
        let lastSeenAlive = try backends.connection.simpleQuery("SELECT (clock_timestamp() - interval '1 second')::text AS t")
            .rows[0].decode("t", as: String.self)
        let highest = try backends.connection.simpleQuery(
            "SELECT greatest((SELECT max(version) FROM user_profiles), (SELECT coalesce(max(version), 0) FROM user_profile_tombstones)) AS v"
        ).rows[0].decode("v", as: Int32.self)

        let raised = try backends.connection.execute(VersionFloor.raise, [VersionFloor.margin, lastSeenAlive]).rows
        #expect(try raised.first?.decode("floor", as: Int32.self) == highest + VersionFloor.margin)
        let again = try backends.connection.execute(VersionFloor.raise, [VersionFloor.margin, lastSeenAlive]).rows
        #expect(again.isEmpty, "a second instance that saw the old database before the raise leaves it alone")

        guard case .updated(let updated) = try backends.store.updateDisplayName(id: seeded.id, to: "After", expectedVersion: 1)
        else {
            Issue.record("the update did not apply")
            return
        }
        #expect(updated.version == highest + VersionFloor.margin + 1, "the service's write answers the version above the floor")
        try sql("UPDATE user_profiles SET display_name = 'next' WHERE id = \(seeded.id)")
        #expect(try row(seeded.id)?.version == updated.version + 1, "then one at a time again")
        try sql("DELETE FROM user_profiles WHERE id = \(seeded.id)")
        let created = try backends.seed()
        #expect(created.version == highest + VersionFloor.margin + 1, "a new profile starts above the floor too")
        try sql("DELETE FROM user_profiles WHERE id = \(created.id)")
    }

    @Test func anIDCannotChange() throws {
        let seeded = try backends.seed()
        #expect(throws: PostgresError.self) {
            try sql("UPDATE user_profiles SET id = id + 1 WHERE id = \(seeded.id)")
        }
        #expect(try row(seeded.id)?.version == 1)
    }
}
