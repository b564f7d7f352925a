public import PostgresClient

/// One committed transaction's changes to `user_profiles`, in commit order.
public struct CommittedTransaction: Sendable, Equatable {
    public var changes: [ProfileChange]
    /// Where the transaction's commit record ends: the position to confirm once it is applied.
    public var endLSN: LSN
    /// Commit time, microseconds since 2000-01-01 UTC (PostgreSQL's epoch).
    public var commitTime: Int64
    /// The whole table was truncated: every cached profile is stale.
    public var truncated: Bool = false
}

/// Turns pgoutput messages into ``CommittedTransaction``s of ``ProfileChange``s.
///
/// pgoutput sends each relation's columns once (and again after a schema change) before the
/// rows that use it; rows arrive as text values. Only `user_profiles` is read; the publication
/// holds no other table today, and a later one must not confuse the feed.
///
/// An updated row carries every column unless one was TOASTed and unchanged; the profile's
/// columns are far below the TOAST threshold, but when one is missing the change is still
/// applied, by version alone (the entry is invalidated rather than replaced; docs/design.md §3).
public struct ProfileChangeDecoder {
    public static let tableName = "user_profiles"

    private var relations: [UInt32: PgOutputRelation] = [:]
    private var open: CommittedTransaction?

    public init() {}

    public enum DecodingError: Error, Equatable, CustomStringConvertible {
        /// A row of a relation whose columns were never described.
        case unknownRelation(UInt32)
        /// A `user_profiles` row without a readable id or version.
        case malformedRow(String)

        public var description: String {
            switch self {
            case .unknownRelation(let id): "pgoutput row for relation \(id) before its description"
            case .malformedRow(let detail): "user_profiles row the feed cannot read: \(detail)"
            }
        }
    }

    /// Feeds one message; returns the transaction it completes, if any.
    public mutating func consume(_ message: PgOutputMessage) throws(DecodingError) -> CommittedTransaction? {
        switch message {
        case .begin(_, let commitTime, _):
            open = CommittedTransaction(changes: [], endLSN: .zero, commitTime: commitTime)
        case .relation(let relation):
            relations[relation.id] = relation
        case .insert(let relationID, let new), .update(let relationID, _, let new):
            guard let columns = try profileColumns(relationID) else { return nil }
            open?.changes.append(try Self.change(from: new, columns: columns))
        case .delete(let relationID, let old):
            guard let columns = try profileColumns(relationID) else { return nil }
            guard let index = columns.firstIndex(where: { $0.name == "id" }), index < old.count,
                case .text(let text) = old[index], let id = Int64(text)
            else { throw .malformedRow("a delete without its id") }
            open?.changes.append(.deleted(id: id))
        case .truncate(let relationIDs):
            if relationIDs.contains(where: { relations[$0].map(Self.isProfileTable) ?? false }) {
                open?.truncated = true
            }
        case .commit(_, let endLSN, let commitTime):
            guard var transaction = open else { return nil }
            open = nil
            transaction.endLSN = endLSN
            transaction.commitTime = commitTime
            return transaction
        case .other:
            break
        }
        return nil
    }

    private static func isProfileTable(_ relation: PgOutputRelation) -> Bool {
        relation.name == tableName
    }

    private func profileColumns(_ relationID: UInt32) throws(DecodingError) -> [PgOutputRelation.Column]? {
        guard let relation = relations[relationID] else { throw .unknownRelation(relationID) }
        return Self.isProfileTable(relation) ? relation.columns : nil
    }

    /// An inserted or updated row: its id and version always, the whole profile when every
    /// column the API shows is there.
    static func change(
        from values: [PgOutputValue], columns: [PgOutputRelation.Column]
    ) throws(DecodingError) -> ProfileChange {
        var text: [String: String] = [:]
        for (column, value) in zip(columns, values) {
            if case .text(let string) = value { text[column.name] = string }
        }
        guard let id = text["id"].flatMap({ Int64($0) }) else { throw .malformedRow("no id") }
        guard let version = text["version"].flatMap({ Int32($0) }) else { throw .malformedRow("no version for \(id)") }
        var row: Profile?
        if let username = text["username"], let displayName = text["display_name"],
            let updatedAt = text["updated_at"].flatMap(apiTimestamp)
        {
            row = Profile(id: id, username: username, displayName: displayName, version: version, updatedAt: updatedAt)
        }
        return .changed(id: id, version: version, row: row)
    }

    /// `timestamptz` as the feed's session prints it (`timezone=UTC`, `DateStyle=ISO`:
    /// `2026-11-23 12:51:45.12+00`) in the API's form, as the store's `to_char` gives it
    /// (`2026-11-23T12:51:45.120000Z`). `nil` for anything else: the change then applies by
    /// version alone.
    static func apiTimestamp(_ text: String) -> String? {
        guard text.hasSuffix("+00") else { return nil }
        let body = text.dropLast(3)
        let parts = body.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1].count >= 8, matches(parts[0], "dddd-dd-dd"),
            matches(parts[1].prefix(8), "dd:dd:dd")
        else { return nil }
        let time = parts[1]
        let seconds = time.prefix(8)
        var fraction = ""
        if time.count > 8 {
            guard time[time.index(time.startIndex, offsetBy: 8)] == "." else { return nil }
            fraction = String(time.dropFirst(9))
        }
        guard fraction.count <= 6, matches(Substring(fraction), String(repeating: "d", count: fraction.count)) else {
            return nil
        }
        fraction += String(repeating: "0", count: 6 - fraction.count)
        return "\(parts[0])T\(seconds).\(fraction)Z"
    }

    /// Whether `text` has `pattern`'s shape: `d` is an ASCII digit, anything else itself.
    private static func matches(_ text: Substring, _ pattern: String) -> Bool {
        text.count == pattern.count
            && zip(text, pattern).allSatisfy { character, expected in
                expected == "d" ? ("0"..."9").contains(character) : character == expected
            }
    }
}
