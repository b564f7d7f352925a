/// Creates and inspects what a ``LogicalReplicationStream`` needs: a logical slot with the
/// `pgoutput` plugin, and a publication. Plain SQL over a normal ``PostgresConnection``.
///
/// A logical slot belongs to the database it was created in, but its name is the server's: every
/// lookup here sees only the slots of the connection's database (`pg_replication_slots.database
/// = current_database()`), so that another database's slot is never read, streamed or dropped
/// as this one's.
///
/// ```swift
/// _ = try LogicalReplicationSetup.ensurePublication(
///     named: "profile_changes", tables: ["user_profiles"], on: connection)
/// _ = try LogicalReplicationSetup.ensureSlot(named: "profile_cache", on: connection)
/// let lag = try LogicalReplicationSetup.slotStatus(named: "profile_cache", on: connection)?.lagBytes
/// ```
///
/// Related PostgreSQL documentation:
/// <https://www.postgresql.org/docs/15/functions-admin.html#FUNCTIONS-REPLICATION>,
/// <https://www.postgresql.org/docs/15/view-pg-replication-slots.html>
public enum LogicalReplicationSetup {
    /// What `pg_replication_slots` says about a slot.
    public struct SlotStatus: Sendable, Equatable {
        /// Everything before it is confirmed by a stream (`confirmed_flush_lsn`); `nil` only while
        /// a new slot is being created.
        public var confirmedFlushLSN: LSN?
        /// Whether a stream is using the slot now.
        public var isActive: Bool
        /// `pg_current_wal_lsn()` minus the confirmed position: WAL the slot keeps the server from
        /// recycling; `nil` with ``confirmedFlushLSN``.
        public var lagBytes: Int64?
        /// `wal_status`: `reserved` or `extended` while the WAL the slot needs is kept;
        /// `unreserved` when it is about to be removed; `lost` once it was, because the slot fell
        /// behind by more than `max_slot_wal_keep_size`.
        public var walStatus: String?
        /// `pg_current_wal_lsn()` minus `restart_lsn`: the WAL the server keeps for the slot (what
        /// `max_slot_wal_keep_size` bounds); `nil` once it is lost.
        public var retainedBytes: Int64?

        /// The slot fell too far behind and the server removed WAL it needed: streaming it fails
        /// (SQLSTATE 55000) and changes were lost. Drop it, create it again, and treat everything
        /// the stream would have repaired as unrepaired.
        public var isLost: Bool { walStatus == "lost" }

        public init(
            confirmedFlushLSN: LSN?, isActive: Bool, lagBytes: Int64?, walStatus: String? = nil, retainedBytes: Int64? = nil
        ) {
            self.confirmedFlushLSN = confirmedFlushLSN
            self.isActive = isActive
            self.lagBytes = lagBytes
            self.walStatus = walStatus
            self.retainedBytes = retainedBytes
        }
    }

    /// Creates the logical slot with the `pgoutput` plugin unless it exists. Returns whether it
    /// created it.
    ///
    /// Safe when two processes race: the loser's SQLSTATE 42710 (duplicate_object) counts as
    /// "exists". Creating waits for the transactions running at that moment to end (the slot
    /// needs a consistent starting point), within the connection's `statement_timeout`; run it
    /// outside a transaction. A slot of that name that is physical, uses another plugin or belongs
    /// to another database is an error, not a match.
    ///
    /// - Throws: ``PostgresError``; SQLSTATE 55000 with a message naming `wal_level` when the
    ///   server does not run with `wal_level=logical`; 53400 when `max_replication_slots` are all in use.
    public static func ensureSlot(named name: String, on connection: PostgresConnection) throws -> Bool {
        if try existingSlotPlugin(named: name, on: connection) != nil { return false }
        do {
            _ = try connection.execute(.createLogicalSlot, [name])
            return true
        } catch let error as PostgresError where error.sqlState == .duplicateObject {
            _ = try existingSlotPlugin(named: name, on: connection)
            return false
        } catch let error as PostgresError where error.sqlState == .objectNotInPrerequisiteState {
            throw PostgresError(
                kind: error.kind, sqlState: error.sqlState,
                message: "logical replication slot \"\(name)\" needs wal_level=logical on the server "
                    + "(postgresql.conf or -c wal_level=logical, then a restart): \(error.message)",
                detail: error.detail, statementName: error.statementName)
        }
    }

    /// Drops the slot if it exists in this database (or is physical: a physical slot has no
    /// database); returns whether it did. A slot of that name in another database is left alone.
    /// A slot nothing reads keeps WAL forever (up to `max_slot_wal_keep_size`), so drop the ones
    /// no longer used.
    ///
    /// - Throws: ``PostgresError``; SQLSTATE 55006 (``PostgresError/isObjectInUse``) while a
    ///   stream uses it.
    @discardableResult
    public static func dropSlot(named name: String, on connection: PostgresConnection) throws -> Bool {
        do {
            return try !connection.execute(.dropSlot, [name]).rows.isEmpty
        } catch let error as PostgresError where error.sqlState == .undefinedObject {
            return false
        }
    }

    /// The slot's confirmed position, whether a stream uses it, its lag in bytes and whether its
    /// WAL is still kept; `nil` when this database has no such slot.
    ///
    /// - Throws: ``PostgresError``.
    public static func slotStatus(named name: String, on connection: PostgresConnection) throws -> SlotStatus? {
        guard let row = try connection.execute(.slotStatus, [name]).rows.first else { return nil }
        let confirmed: String? = try row.decodeIfPresent("confirmed_flush_lsn")
        return SlotStatus(
            confirmedFlushLSN: confirmed.flatMap(LSN.init), isActive: try row.decode("active"),
            lagBytes: try row.decodeIfPresent("lag_bytes"), walStatus: try row.decodeIfPresent("wal_status"),
            retainedBytes: try row.decodeIfPresent("retained_bytes"))
    }

    /// A slot among several (``slots(namedLike:on:)``) and the session that streams it.
    public struct NamedSlot: Sendable, Equatable {
        public var name: String
        public var status: SlotStatus
        /// The `application_name` of the session streaming the slot, while one does and the
        /// role may see it (`pg_read_all_stats`, or the same role).
        public var consumer: String?
        /// That session's client address; nil over a Unix socket or when not visible.
        public var consumerAddress: String?

        public init(name: String, status: SlotStatus, consumer: String? = nil, consumerAddress: String? = nil) {
            self.name = name
            self.status = status
            self.consumer = consumer
            self.consumerAddress = consumerAddress
        }
    }

    /// Every logical slot of this database whose name matches the `LIKE` pattern, in name order,
    /// each with the session that streams it.
    ///
    /// - Throws: ``PostgresError``.
    public static func slots(namedLike pattern: String, on connection: PostgresConnection) throws -> [NamedSlot] {
        try connection.execute(.slotsLike, [pattern]).rows.map { row in
            let confirmed: String? = try row.decodeIfPresent("confirmed_flush_lsn")
            return NamedSlot(
                name: try row.decode("slot_name"),
                status: SlotStatus(
                    confirmedFlushLSN: confirmed.flatMap(LSN.init), isActive: try row.decode("active"),
                    lagBytes: try row.decodeIfPresent("lag_bytes"), walStatus: try row.decodeIfPresent("wal_status"),
                    retainedBytes: try row.decodeIfPresent("retained_bytes")),
                consumer: try row.decodeIfPresent("consumer"), consumerAddress: try row.decodeIfPresent("consumer_address"))
        }
    }

    /// Creates a publication of `tables` (names in the search path, each quoted as one
    /// identifier) unless one of that name exists; returns whether it created it. An existing
    /// publication is left as it is. 42710 from a race counts as "exists".
    ///
    /// - Throws: ``PostgresError``; 42P01 for a table that does not exist.
    public static func ensurePublication(
        named name: String, tables: [String], on connection: PostgresConnection
    ) throws -> Bool {
        guard !name.contains("\0"), tables.allSatisfy({ !$0.contains("\0") }), !tables.isEmpty else {
            throw PostgresError(
                kind: .invalidConfiguration, message: "a publication needs tables and names without NUL")
        }
        if try publicationExists(named: name, on: connection) { return false }
        let quotedTables = tables.map(LogicalReplicationStream.quoteIdentifier).joined(separator: ", ")
        do {
            try connection.simpleQuery(
                "CREATE PUBLICATION \(LogicalReplicationStream.quoteIdentifier(name)) FOR TABLE \(quotedTables)")
            return true
        } catch let error as PostgresError where error.sqlState == .duplicateObject {
            return false
        }
    }

    /// Whether a publication of that name exists now.
    public static func publicationExists(named name: String, on connection: PostgresConnection) throws -> Bool {
        try !connection.execute(.publicationExists, [name]).rows.isEmpty
    }

    /// The object identifier of the connection's database (`pg_database.oid`): what tells its
    /// slots apart from other databases' on the same server. It stays while the database does
    /// (`pg_upgrade` keeps it too); a database restored from a dump into a new one gets another.
    public static func databaseOID(on connection: PostgresConnection) throws -> UInt32 {
        let oid: Int64 = try connection.execute(.databaseOID, []).rows.first?.decode("oid") ?? -1
        guard let value = UInt32(exactly: oid) else {
            throw PostgresError(kind: .other, message: "pg_database has no row for current_database()")
        }
        return value
    }

    /// The server's current write position (`pg_current_wal_lsn()`): every transaction committed
    /// before the call ends before it.
    public static func currentPosition(on connection: PostgresConnection) throws -> LSN {
        let text: String = try connection.execute(.currentWALPosition, []).rows.first?.decode("lsn") ?? ""
        guard let position = LSN(text) else {
            throw PostgresError(kind: .other, message: "pg_current_wal_lsn() answered '\(text)'")
        }
        return position
    }

    /// Which database this is and where its WAL stands: the cluster's system identifier (new
    /// with every `initdb`), the timeline (new after every promotion or point-in-time recovery)
    /// and the current write position.
    public struct DatabaseIdentity: Sendable, Equatable {
        public var systemIdentifier: String
        public var timeline: Int32
        public var position: LSN
        /// The database's clock when it was asked (`clock_timestamp()`, as text), to compare with
        /// times it recorded.
        public var observedAt: String

        public init(systemIdentifier: String, timeline: Int32, position: LSN, observedAt: String = "") {
            self.systemIdentifier = systemIdentifier
            self.timeline = timeline
            self.position = position
            self.observedAt = observedAt
        }
    }

    /// The identity of the database behind `connection` now.
    public static func databaseIdentity(on connection: PostgresConnection) throws -> DatabaseIdentity {
        guard let row = try connection.execute(.databaseIdentity, []).rows.first,
            let position = LSN(try row.decode("lsn") as String)
        else { throw PostgresError(kind: .other, message: "pg_control_system() answered no row") }
        return DatabaseIdentity(
            systemIdentifier: try row.decode("system_identifier"), timeline: try row.decode("timeline_id"),
            position: position, observedAt: try row.decode("observed_at"))
    }

    /// Moves the slot's confirmed position to `position` without decoding the changes before it
    /// for any output plugin (`pg_replication_slot_advance`: PostgreSQL 15 decodes them in
    /// fast-forward mode), so a change pgoutput refuses to send is skipped. Returns the position
    /// the slot is at afterwards. A position before the slot's is no change.
    ///
    /// - Throws: ``PostgresError``; SQLSTATE 55006 (``PostgresError/isObjectInUse``) while a
    ///   stream uses it, 42704 when there is no such slot.
    @discardableResult
    public static func advanceSlot(named name: String, to position: LSN, on connection: PostgresConnection) throws -> LSN? {
        let text: String? = try connection.execute(.advanceSlot, [name, position.description]).rows.first?
            .decodeIfPresent("end_lsn")
        return text.flatMap(LSN.init)
    }

    /// The plugin of the logical slot `name`, `nil` when there is none; throws for a slot that
    /// is not a logical `pgoutput` slot of this database.
    private static func existingSlotPlugin(named name: String, on connection: PostgresConnection) throws -> String? {
        guard let row = try connection.execute(.slotKind, [name]).rows.first else { return nil }
        let type: String = try row.decode("slot_type")
        let plugin: String? = try row.decodeIfPresent("plugin")
        let database: String? = try row.decodeIfPresent("database")
        let isHere: Bool? = try row.decodeIfPresent("is_here")
        if type == "logical", isHere != true {
            throw PostgresError(
                kind: .other, sqlState: .duplicateObject,
                message: "replication slot \"\(name)\" exists but belongs to database \"\(database ?? "?")\", "
                    + "not this one (slot names are the server's)")
        }
        guard type == "logical", plugin == "pgoutput" else {
            throw PostgresError(
                kind: .other, sqlState: .duplicateObject,
                message: "replication slot \"\(name)\" exists but is \(type) with plugin \(plugin ?? "none"), "
                    + "not logical pgoutput")
        }
        return plugin
    }
}

extension PostgresStatement {
    // Statement names start with "logical_replication_" so they cannot clash with a caller's.
    fileprivate static let createLogicalSlot = PostgresStatement(
        name: "logical_replication_create_slot",
        sql: "SELECT slot_name FROM pg_create_logical_replication_slot($1, 'pgoutput')", isIdempotent: false)
    fileprivate static let dropSlot = PostgresStatement(
        name: "logical_replication_drop_slot",
        sql: """
            SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
            WHERE slot_name = $1 AND (database IS NULL OR database = current_database())
            """,
        isIdempotent: false)
    fileprivate static let slotKind = PostgresStatement(
        name: "logical_replication_slot_kind",
        sql: """
            SELECT slot_type, plugin, database::text AS database, database = current_database() AS is_here
            FROM pg_replication_slots WHERE slot_name = $1
            """,
        isIdempotent: true)
    fileprivate static let slotStatus = PostgresStatement(
        name: "logical_replication_slot_status",
        sql: """
            SELECT confirmed_flush_lsn::text AS confirmed_flush_lsn, active, wal_status,
                   pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint AS lag_bytes,
                   pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint AS retained_bytes
            FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()
            """,
        isIdempotent: true)
    fileprivate static let slotsLike = PostgresStatement(
        name: "logical_replication_slots_like",
        sql: """
            SELECT s.slot_name::text AS slot_name, s.confirmed_flush_lsn::text AS confirmed_flush_lsn, s.active,
                   s.wal_status,
                   pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint AS lag_bytes,
                   pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn)::bigint AS retained_bytes,
                   r.application_name AS consumer, host(r.client_addr) AS consumer_address
            FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
            WHERE s.slot_type = 'logical' AND s.database = current_database() AND s.slot_name LIKE $1
            ORDER BY s.slot_name
            """,
        isIdempotent: true)
    fileprivate static let databaseIdentity = PostgresStatement(
        name: "logical_replication_database_identity",
        sql: """
            SELECT s.system_identifier::text AS system_identifier, c.timeline_id, pg_current_wal_lsn()::text AS lsn,
                   clock_timestamp()::text AS observed_at
            FROM pg_control_system() s, pg_control_checkpoint() c
            """,
        isIdempotent: true)
    fileprivate static let databaseOID = PostgresStatement(
        name: "logical_replication_database_oid",
        sql: "SELECT oid::bigint AS oid FROM pg_database WHERE datname = current_database()", isIdempotent: true)
    fileprivate static let currentWALPosition = PostgresStatement(
        name: "logical_replication_current_wal_lsn", sql: "SELECT pg_current_wal_lsn()::text AS lsn",
        isIdempotent: true)
    fileprivate static let advanceSlot = PostgresStatement(
        name: "logical_replication_advance_slot",
        sql: "SELECT end_lsn::text AS end_lsn FROM pg_replication_slot_advance($1, $2::pg_lsn)", isIdempotent: true)
    fileprivate static let publicationExists = PostgresStatement(
        name: "logical_replication_publication_exists", sql: "SELECT 1 FROM pg_publication WHERE pubname = $1",
        isIdempotent: true)
}
