public import PostgresClient

/// One committed transaction's changes to `user_profiles`, in commit order — or, for a
/// transaction larger than the decoder's part size, one part of them (docs/design.md §3.9).
public struct CommittedTransaction: Sendable, Equatable {
    public var changes: [ProfileChange]
    /// Where the transaction's commit record ends: the position to confirm once it is applied
    /// (`.zero` in a part that is not the last).
    public var endLSN: LSN
    /// Commit time, microseconds since 2000-01-01 UTC (PostgreSQL's epoch).
    public var commitTime: Int64
    /// The whole table was truncated: every cached profile is stale.
    public var truncated: Bool = false
    /// The transaction's last part (or all of it): once applied, its position may be confirmed.
    public var isComplete: Bool = true
    /// The transaction's id (32 bits, as pgoutput sends it): the feed waits until it is visible
    /// to other sessions before it repairs the cache (``CommitVisibility``).
    public var xid: UInt32 = 0
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
    /// Changes a part holds at most (docs/design.md §3.9).
    private let maximumPartChanges: Int
    /// The fields a decoded row carries (the instance's declarations): a column that is no
    /// declared field is not the API's, and a declared field the row lacks leaves the row unread.
    private let profileFields: ProfileFieldCatalog

    /// - Parameter maximumPartChanges: a transaction with more changes is handed out in parts of
    ///   this many as they arrive, so that memory does not grow with the transaction. That is
    ///   safe because pgoutput, without `streaming`, sends a transaction only once it has
    ///   committed: every part is committed data.
    ///   - profileFields: the declared fields, as the instance serves them.
    public init(maximumPartChanges: Int = .max, profileFields: ProfileFieldCatalog = .standard) {
        self.maximumPartChanges = max(1, maximumPartChanges)
        self.profileFields = profileFields
    }

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
        case .begin(_, let commitTime, let xid):
            open = CommittedTransaction(changes: [], endLSN: .zero, commitTime: commitTime, xid: xid)
        case .relation(let relation):
            relations[relation.id] = relation
        case .insert(let relationID, let new), .update(let relationID, _, let new):
            guard let columns = try profileColumns(relationID) else { return nil }
            open?.changes.append(try Self.change(from: new, columns: columns, fields: profileFields))
            return partIfFull()
        case .delete(let relationID, let old):
            guard let columns = try profileColumns(relationID) else { return nil }
            guard let index = columns.firstIndex(where: { $0.name == "id" }), index < old.count,
                case .text(let text) = old[index], let id = Int64(text)
            else { throw .malformedRow("a delete without its id") }
            open?.changes.append(.deleted(id: id))
            return partIfFull()
        case .truncate(let relationIDs):
            if relationIDs.contains(where: { relations[$0].map(Self.isProfileTable) ?? false }) {
                // The changes before it go first, so that the flush comes after them.
                let before = open.map { !$0.changes.isEmpty } == true ? takePart() : nil
                open?.truncated = true
                return before
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

    /// The open transaction's changes so far as a part, when it has reached the part size.
    private mutating func partIfFull() -> CommittedTransaction? {
        guard let open, open.changes.count >= maximumPartChanges else { return nil }
        return takePart()
    }

    /// Hands out what the open transaction holds as a part that is not its last.
    private mutating func takePart() -> CommittedTransaction? {
        guard var part = open else { return nil }
        part.isComplete = false
        part.endLSN = .zero
        open?.changes = []
        open?.truncated = false
        return part
    }

    private static func isProfileTable(_ relation: PgOutputRelation) -> Bool {
        relation.name == tableName
    }

    private func profileColumns(_ relationID: UInt32) throws(DecodingError) -> [PgOutputRelation.Column]? {
        guard let relation = relations[relationID] else { throw .unknownRelation(relationID) }
        return Self.isProfileTable(relation) ? relation.columns : nil
    }

    /// An inserted or updated row: its id and version always, the whole profile when every
    /// column the API shows is there. Runs once per changed row — a million for a backfill — so
    /// it reads the relation's short column list instead of building a dictionary per row, and
    /// timestamps as bytes.
    static func change(
        from values: [PgOutputValue], columns: [PgOutputRelation.Column], fields: ProfileFieldCatalog = .standard
    ) throws(DecodingError) -> ProfileChange {
        func value(_ name: String) -> PgOutputValue? {
            guard let index = columns.firstIndex(where: { $0.name == name }), index < values.count else { return nil }
            return values[index]
        }
        func text(_ name: String) -> String? {
            guard case .text(let string)? = value(name) else { return nil }
            return string
        }
        guard let id = text("id").flatMap({ Int64($0) }) else { throw .malformedRow("no id") }
        guard let version = text("version").flatMap({ Int32($0) }) else { throw .malformedRow("no version for \(id)") }
        var row: Profile?
        if let username = text("username"), let displayName = text("display_name"),
            let updatedAt = text("updated_at").flatMap(apiTimestamp)
        {
            // Every declared field must be there, `NULL` or text: one missing (its column not
            // added yet, a TOASTed value the update left) leaves the row unread.
            var entries: [ProfileFields.Entry] = []
            entries.reserveCapacity(fields.declarations.count)
            for declaration in fields.declarations {
                switch value(declaration.name) {
                case .text(let string)?: entries.append(.init(declaration, value: string))
                case .null?: entries.append(.init(declaration, value: nil))
                case .unchangedToast?, nil: return .changed(id: id, version: version, row: nil)
                }
            }
            row = Profile(
                id: id, username: username, displayName: displayName, fields: ProfileFields(entries), version: version,
                updatedAt: updatedAt)
        }
        return .changed(id: id, version: version, row: row)
    }

    /// `timestamptz` as the feed's session prints it (`timezone=UTC`, `DateStyle=ISO`:
    /// `2026-11-23 12:51:45.12+00`) in the API's form, as the store's `to_char` gives it
    /// (`2026-11-23T12:51:45.120000Z`). `nil` for anything else: the change then applies by
    /// version alone.
    static func apiTimestamp(_ text: String) -> String? {
        var bytes = Array(text.utf8)
        // `dddd-dd-dd dd:dd:dd`, then an optional `.` and 1–6 digits, then `+00`.
        let shape = Array("dddd-dd-dd dd:dd:dd".utf8)
        guard bytes.count >= shape.count + 3, bytes.suffix(3).elementsEqual("+00".utf8) else { return nil }
        bytes.removeLast(3)
        let isDigit = { (byte: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
        for (byte, expected) in zip(bytes, shape) where expected == UInt8(ascii: "d") ? !isDigit(byte) : byte != expected {
            return nil
        }
        var fraction = bytes[shape.count...]
        if !fraction.isEmpty {
            guard fraction.first == UInt8(ascii: "."), fraction.count <= 7, fraction.dropFirst().allSatisfy(isDigit) else {
                return nil
            }
            fraction = fraction.dropFirst()
        }
        var api = Array(bytes[..<shape.count])
        api[10] = UInt8(ascii: "T")
        api.append(UInt8(ascii: "."))
        api.append(contentsOf: fraction)
        api.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: 6 - fraction.count))
        api.append(UInt8(ascii: "Z"))
        return String(decoding: api, as: UTF8.self)
    }
}
