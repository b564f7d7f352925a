import PostgresClient
import Testing

@testable import ProfileService

/// pgoutput messages → committed profile changes (pure logic; the real stream is in ChangeFeedTests).
struct ProfileChangeDecoderTests {
    private static let profiles = PgOutputRelation(
        id: 16_384, namespace: "public", name: "user_profiles",
        columns: ["id", "username", "display_name", "version", "created_at", "updated_at", "bio", "avatar_url", "location", "website"].map {
            .init(name: $0, typeOID: 25, isKey: $0 == "id")
        })
    private static let other = PgOutputRelation(
        id: 99, namespace: "public", name: "audit", columns: [.init(name: "id", typeOID: 20, isKey: true)])

    private func row(_ id: Int64, _ version: Int32, updatedAt: PgOutputValue = .text("2026-11-23 12:51:45.12+00"))
        -> [PgOutputValue]
    {
        [
            .text("\(id)"), .text("u\(id)"), .text("Name \(id)"), .text("\(version)"), .text("2026-11-01 00:00:00+00"), updatedAt,
            .text("Bio of \(id)\nsecond line"), .null, .text("Lisbon"), .null,
        ]
    }

    /// What the decoder hands out for one transaction of `messages`: its parts, in order.
    private func parts(_ messages: [PgOutputMessage], maximumPartChanges: Int = .max) throws -> [CommittedTransaction] {
        var decoder = ProfileChangeDecoder(maximumPartChanges: maximumPartChanges)
        var parts: [CommittedTransaction] = []
        for message in [.relation(Self.profiles), .relation(Self.other), .begin(finalLSN: LSN(rawValue: 90), commitTime: 5, xid: 7)]
            + messages + [.commit(commitLSN: LSN(rawValue: 90), endLSN: LSN(rawValue: 100), commitTime: 5)]
        {
            if let part = try decoder.consume(message) { parts.append(part) }
        }
        return parts
    }

    /// The transaction's parts as one: every change in order, truncated if any part was.
    private func transaction(_ messages: [PgOutputMessage]) throws -> CommittedTransaction? {
        let all = try parts(messages)
        guard var last = all.last, last.isComplete else { return nil }
        last.changes = all.flatMap(\.changes)
        last.truncated = all.contains(where: \.truncated)
        return last
    }

    @Test func aTransactionLargerThanAPartComesInPartsOnlyTheLastOfWhichMayBeConfirmed() throws {
        let updates = (1...5).map { PgOutputMessage.update(relationID: 16_384, old: nil, new: row(Int64($0), 2)) }
        let handedOut = try parts(updates, maximumPartChanges: 2)
        #expect(handedOut.map(\.changes.count) == [2, 2, 1])
        #expect(handedOut.map(\.isComplete) == [false, false, true])
        #expect(handedOut.map(\.endLSN) == [.zero, .zero, LSN(rawValue: 100)])
        #expect(handedOut.allSatisfy { $0.commitTime == 5 })
        #expect(handedOut.flatMap(\.changes).map(\.id) == [1, 2, 3, 4, 5])
        // A transaction that fills its last part exactly ends with an empty, complete one.
        let exact = try parts(Array(updates.prefix(4)), maximumPartChanges: 2)
        #expect(exact.map(\.changes.count) == [2, 2, 0])
        #expect(exact.last?.isComplete == true)
    }

    @Test func aTruncateInTheMiddleComesAfterTheChangesBeforeIt() throws {
        let handedOut = try parts([
            .update(relationID: 16_384, old: nil, new: row(1, 2)),
            .truncate(relationIDs: [16_384]),
            .insert(relationID: 16_384, new: row(2, 1)),
        ])
        #expect(handedOut.map { $0.changes.map(\.id) } == [[1], [2]])
        #expect(handedOut.map(\.truncated) == [false, true])
        #expect(handedOut.map(\.isComplete) == [false, true])
    }

    @Test func insertsAndUpdatesCarryTheWholeRowInTheAPIsForm() throws {
        let done = try #require(
            try transaction([.insert(relationID: 16_384, new: row(1, 1)), .update(relationID: 16_384, old: nil, new: row(2, 7))]))
        #expect(done.endLSN == LSN(rawValue: 100))
        #expect(done.commitTime == 5)
        let fields = ProfileFields([
            .init(name: "bio", value: "Bio of 2\nsecond line"), .init(name: "avatar_url", value: nil),
            .init(name: "location", value: "Lisbon"), .init(name: "website", value: nil),
        ])
        let expected = Profile(
            id: 2, username: "u2", displayName: "Name 2", fields: fields, version: 7, updatedAt: "2026-11-23T12:51:45.120000Z")
        #expect(done.changes.last == .changed(id: 2, version: 7, row: expected))
        #expect(done.changes.count == 2)
    }

    @Test func aDeclaredFieldTheRowLacksLeavesTheRowUnread() throws {
        // A TOASTed bio the update left unchanged is not sent again.
        var values = row(3, 4)
        values[6] = .unchangedToast
        let toasted = try #require(try transaction([.update(relationID: 16_384, old: nil, new: values)]))
        #expect(toasted.changes == [.changed(id: 3, version: 4, row: nil)])
        // A field declared before its column reached this relation (or a column of another name).
        let pronouns = try ProfileFieldCatalog(
            ProfileFieldCatalog.standard.declarations + [ProfileFieldDeclaration(name: "pronouns", kind: .text, maximumLength: 40)])
        let change = try ProfileChangeDecoder.change(from: row(3, 4), columns: Self.profiles.columns, fields: pronouns)
        #expect(change == .changed(id: 3, version: 4, row: nil))
        // A column that is no declared field is not the API's: the row carries the declared ones.
        let fewer = try ProfileChangeDecoder.change(from: row(3, 4), columns: Self.profiles.columns, fields: .none)
        guard case .changed(_, _, let row?) = fewer else {
            Issue.record("expected the row: \(fewer)")
            return
        }
        #expect(row.fields.entries.isEmpty && row.displayName == "Name 3")
    }

    @Test func anUnchangedToastedColumnLeavesTheVersionAlone() throws {
        var values = row(3, 4)
        values[2] = .unchangedToast
        let done = try #require(try transaction([.update(relationID: 16_384, old: nil, new: values)]))
        #expect(done.changes == [.changed(id: 3, version: 4, row: nil)])
    }

    @Test func deletesTruncatesAndOtherTables() throws {
        let done = try #require(
            try transaction([
                .delete(relationID: 16_384, old: [.text("5")] + Array(repeating: .null, count: 9)),
                .insert(relationID: 99, new: [.text("1")]),
                .truncate(relationIDs: [16_384]),
            ]))
        #expect(done.changes == [.deleted(id: 5)])
        #expect(done.truncated)
    }

    @Test func rowsWithoutIdOrVersionOrRelationAreErrors() {
        #expect(throws: ProfileChangeDecoder.DecodingError.unknownRelation(4)) {
            var decoder = ProfileChangeDecoder()
            _ = try decoder.consume(.insert(relationID: 4, new: []))
        }
        var values = row(6, 1)
        values[3] = .null
        #expect(throws: ProfileChangeDecoder.DecodingError.self) {
            _ = try transaction([.insert(relationID: 16_384, new: values)])
        }
    }

    @Test(arguments: [
        ("2026-11-23 12:51:45.123456+00", "2026-11-23T12:51:45.123456Z"),
        ("2026-11-23 12:51:45.1+00", "2026-11-23T12:51:45.100000Z"),
        ("2026-11-23 12:51:45+00", "2026-11-23T12:51:45.000000Z"),
    ])
    func timestampsInUTC(text: String, api: String) {
        #expect(ProfileChangeDecoder.apiTimestamp(text) == api)
    }

    @Test(arguments: ["2026-11-23 12:51:45+01", "2026-11-23T12:51:45Z", "23.11.2026 12:51:45+00", "2026-11-23 12:51:45.1234567+00", ""])
    func otherTimestampFormsAreNotGuessed(text: String) {
        #expect(ProfileChangeDecoder.apiTimestamp(text) == nil)
    }
}
