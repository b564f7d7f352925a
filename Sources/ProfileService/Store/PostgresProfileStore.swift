import Foundation
public import Logging
import Metrics
public import PostgresClient

/// ``ProfileStore`` over PostgreSQL: optimistic updates in one statement.
///
/// Its statements run on a connection of its own (a thread that talks to PostgreSQL all the
/// time: the change feed, a standby's reader) or on one borrowed from a pool for each statement
/// (the request workers, which mostly wait on memcached: docs/design.md §9).
public final class PostgresProfileStore: ProfileStore {
    private let source: Source
    private let logger: Logger
    private let statements: ProfileStatements

    private enum Source {
        case connection(PostgresConnection)
        case pool(PostgresConnectionPool)
    }

    /// The statements a store of these fields uses; declare them on the connection that you pass in.
    public static func statements(for catalog: ProfileFieldCatalog) -> [PostgresStatement] {
        ProfileStatements(catalog).all
    }

    /// The statements a read-only session (a standby's) needs.
    public static func readStatements(for catalog: ProfileFieldCatalog) -> [PostgresStatement] {
        let statements = ProfileStatements(catalog)
        return [statements.select, statements.selectMany]
    }

    /// A store whose statements run on `connection`, which the caller's thread owns.
    public init(connection: PostgresConnection, catalog: ProfileFieldCatalog = .standard, logger: Logger) {
        self.source = .connection(connection)
        self.statements = ProfileStatements(catalog)
        self.logger = logger
    }

    /// A store whose statements each borrow a connection of `pool`.
    public init(pool: PostgresConnectionPool, catalog: ProfileFieldCatalog = .standard, logger: Logger) {
        self.source = .pool(pool)
        self.statements = ProfileStatements(catalog)
        self.logger = logger
    }

    public func profile(id: Int64) throws(ProfileStoreError) -> Profile? {
        try run { try execute(statements.select, [id]).rows.first.map(decode) }
    }

    public func profiles(ids: [Int64]) throws(ProfileStoreError) -> [Int64: Profile] {
        guard !ids.isEmpty else { return [:] }
        let rows = try run { try execute(statements.selectMany, [Self.arrayLiteral(ids.map(String.init))]).rows.map(decode) }
        return Dictionary(rows.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    public func deletedVersion(id: Int64) throws(ProfileStoreError) -> Int32? {
        try run { try execute(statements.deletedVersion, [id]).rows.first.map { try $0.decode("version", as: Int32.self) } }
    }

    public func walPosition() throws(ProfileStoreError) -> LSN {
        let text = try run { try execute(statements.walPosition, []).rows.first?.decode("position", as: String.self) }
        guard let text, let position = LSN(text) else { throw .unexpected("pg_current_wal_flush_lsn() returned \(text ?? "no row")") }
        return position
    }

    public func update(id: Int64, changes: ProfileChanges, expectedVersion: Int32?) throws(ProfileStoreError)
        -> ProfileUpdateOutcome
    {
        let parameters: [(any PostgresEncodable)?] = [id, expectedVersion, changes.displayName, changes.fieldsJSON, changes.username]
        let updated: Profile?
        do {
            updated = try execute(statements.update, parameters).rows.first.map(decode)
        } catch let error as PostgresError where Self.isHandleTaken(error) {
            throw .usernameTaken
        } catch {
            throw map(error)
        }
        if let updated { return .updated(updated) }
        // Nothing matched: tell "gone" from "changed since" with one more read.
        guard expectedVersion != nil, let current = try profile(id: id) else { return .notFound }
        return .versionMismatch(current: current)
    }

    public func delete(id: Int64, expectedVersion: Int32?) throws(ProfileStoreError) -> ProfileDeleteOutcome {
        if let version = try run({ try execute(statements.delete, [id, expectedVersion]).rows.first?.decode("version", as: Int32.self) }) {
            return .deleted(version: version)
        }
        // Nothing matched: tell "gone" from "changed since" with one more read.
        guard expectedVersion != nil, let current = try profile(id: id) else { return .notFound }
        return .versionMismatch(current: current)
    }

    public func updateProfiles(_ updates: [ProfileUpdate]) throws(ProfileStoreError) -> [Int64: Profile]? {
        guard !updates.isEmpty else { return [:] }
        let ids = Self.arrayLiteral(updates.map { String($0.id) })
        let versions = Self.arrayLiteral(updates.map { $0.expectedVersion.map(String.init) ?? "NULL" })
        let names = Self.arrayLiteral(updates.map { $0.changes.displayName.map(Self.arrayElement) ?? "NULL" })
        let fields = Self.arrayLiteral(updates.map { Self.arrayElement($0.changes.fieldsJSON) })
        let usernames = Self.arrayLiteral(updates.map { $0.changes.username.map(Self.arrayElement) ?? "NULL" })
        do {
            let rows = try execute(statements.updateMany, [ids, versions, names, fields, usernames]).rows.map(decode)
            return Dictionary(rows.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        } catch let error as PostgresError where error.sqlState != nil && !error.isUnavailable {
            // The server refused the statement (a deadlock, a constraint): in its own transaction,
            // so nothing changed. Each write alone meets only its own fate.
            logger.info("several writes refused together; each is made alone", metadata: ["error": "\(error)"])
            return nil
        } catch {
            throw map(error)
        }
    }

    /// An array in PostgreSQL's text form (`{1,2,3}`), for a `$n::type[]` parameter.
    static func arrayLiteral(_ elements: [String]) -> String {
        "{" + elements.joined(separator: ",") + "}"
    }

    /// A text element of an array literal: always quoted (so `NULL` stays a name), with `"` and
    /// `\` escaped.
    static func arrayElement(_ text: String) -> String {
        var element = "\""
        for character in text.unicodeScalars {
            if character == "\"" || character == "\\" { element.unicodeScalars.append("\\") }
            element.unicodeScalars.append(character)
        }
        element += "\""
        return element
    }

    public func create(id: Int64, username: String, displayName: String, fields: [ProfileFields.Entry])
        throws(ProfileStoreError) -> Profile
    {
        let changes = ProfileChanges(displayName: displayName, fields: fields)
        do {
            guard let row = try execute(statements.insert, [id, username, displayName, changes.fieldsJSON]).rows.first else {
                throw ProfileStoreError.unexpected("INSERT … RETURNING returned no row")
            }
            return try decode(row)
        } catch let error as PostgresError where error.kind == .uniqueViolation {
            if Self.isHandleTaken(error) { throw .usernameTaken }
            throw .idTaken(current: try? profile(id: id))
        } catch {
            throw map(error)
        }
    }

    public func handles(_ handles: [ProfileHandle]) throws(ProfileStoreError) -> [ProfileHandle: HandleRecord] {
        guard !handles.isEmpty else { return [:] }
        let rows = try run { try execute(statements.handles, [Self.arrayLiteral(handles.map(\.key))]).rows }
        var records: [ProfileHandle: HandleRecord] = [:]
        for row in rows {
            let decoded = try run { () throws -> (ProfileHandle?, HandleRecord) in
                let handle = ProfileHandle(username: try row.decode("handle", as: String.self))
                let id = try row.decode("id", as: Int64.self)
                if let version = try row.decodeIfPresent("version", as: Int32.self) { return (handle, .held(id: id, version: version)) }
                return (handle, .reserved(id: id, untilMilliseconds: try row.decode("reserved_until", as: Int64.self)))
            }
            guard let handle = decoded.0 else { continue }
            // A held handle wins over a reservation (taking a handle deletes its reservation).
            if case .held = records[handle] { continue }
            records[handle] = decoded.1
        }
        return records
    }

    public func export(id: Int64) throws(ProfileStoreError) -> ProfileExport? {
        guard let row = try run({ try execute(statements.export, [id]).rows.first }) else { return nil }
        return try run {
            let reservations = try JSONDecoder().decode(
                [UsernameReservation].self, from: Data(try row.decode("reservations", as: String.self).utf8))
            return ProfileExport(
                profile: try statements.decode(row), createdAt: try row.decode("created_at"), usernameReservations: reservations)
        }
    }

    /// A unique violation of a handle: held by another profile in any spelling, or reserved for
    /// one (migrations/0007_handles.sql).
    private static func isHandleTaken(_ error: PostgresError) -> Bool {
        guard error.kind == .uniqueViolation else { return false }
        return ["user_profiles_username_key", "user_profiles_handle_key", "username_reserved"].contains(error.constraint ?? "")
    }

    public func isHealthy() -> Bool {
        switch source {
        case .connection(let connection): connection.checkHealth()
        case .pool(let pool): (try? pool.withConnection { $0.checkHealth() }) ?? false
        }
    }

    private func execute(_ statement: PostgresStatement, _ parameters: [(any PostgresEncodable)?]) throws
        -> PostgresQueryResult
    {
        switch source {
        case .connection(let connection): try connection.execute(statement, parameters)
        case .pool(let pool): try pool.withConnection { try $0.execute(statement, parameters) }
        }
    }

    private func decode(_ row: PostgresRow) throws -> Profile {
        try statements.decode(row)
    }

    private func run<T>(_ body: () throws -> T) throws(ProfileStoreError) -> T {
        do {
            return try body()
        } catch {
            throw map(error)
        }
    }

    private func map(_ error: any Error) -> ProfileStoreError {
        if let error = error as? ProfileStoreError { return error }
        let kind = (error as? PostgresError).map { "\($0.kind)" } ?? "decoding"
        Counter(label: MetricFamily.databaseErrors.name, dimensions: [("kind", kind)]).increment()
        if let error = error as? PostgresError, error.isUnavailable || error.isRetryable {
            logger.warning("database unavailable", metadata: ["error": "\(error)"])
            return .unavailable
        }
        logger.error("database error", metadata: ["error": "\(error)"])
        return .unexpected("\(error)")
    }
}

@available(*, unavailable, message: "may own a PostgresConnection, which belongs to one thread")
extension PostgresProfileStore: Sendable {}
