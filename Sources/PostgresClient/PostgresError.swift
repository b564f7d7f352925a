/// An error from PostgreSQL or from the connection to it.
///
/// The ``kind`` is what the service acts on (a unique violation is a 409, an unavailable database
/// a 503, a serialization failure a retry); ``sqlState`` keeps the server's exact code.
///
/// Profiles are personal data, so ``description`` (what `"\(error)"` and loggers print) shows
/// only the kind, the SQLSTATE and the statement name. The server's ``message`` and ``detail``
/// can quote values (`Key (username)=(alice) already exists.`); they appear in
/// ``debugDescription`` only. Parameter values are never stored.
///
/// Related libpq documentation: <https://www.postgresql.org/docs/15/libpq-exec.html#LIBPQ-PQRESULTERRORFIELD>
public struct PostgresError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The cases the service can act on.
    public enum Kind: Sendable, Hashable {
        /// SQLSTATE 23505.
        case uniqueViolation
        /// SQLSTATE 23514.
        case checkViolation
        /// SQLSTATE 40001: retry the transaction.
        case serializationFailure
        /// SQLSTATE 40P01: retry the transaction.
        case deadlockDetected
        /// SQLSTATE 57014, including `statement_timeout`.
        case queryCanceled
        /// SQLSTATE 55P03, including `lock_timeout`.
        case lockNotAvailable
        /// Cannot connect, connection lost, reconnect in backoff, SQLSTATE class 08 or 57P01–57P03,
        /// or a failure without SQLSTATE while the connection is `CONNECTION_BAD`.
        case connectionUnavailable
        /// The connection URL or conninfo is malformed.
        case invalidConfiguration
        /// Anything else; see ``PostgresError/sqlState``.
        case other
    }

    public let kind: Kind
    /// The server's SQLSTATE, or `nil` for client-side failures (connection, configuration).
    public let sqlState: SQLState?
    /// The server's primary message (`PG_DIAG_MESSAGE_PRIMARY`), or libpq's message.
    public let message: String
    /// The server's detail (`PG_DIAG_MESSAGE_DETAIL`); may quote data.
    public let detail: String?
    /// The violated constraint (`PG_DIAG_CONSTRAINT_NAME`), e.g. `"user_profiles_username_key"`.
    public let constraint: String?
    /// The name of the ``PostgresStatement`` that failed, if any.
    public let statementName: String?

    /// Creates an error; ``PostgresConnection`` makes these, and fakes of a store may too.
    public init(
        kind: Kind, sqlState: SQLState? = nil, message: String, detail: String? = nil, constraint: String? = nil,
        statementName: String? = nil
    ) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.constraint = constraint
        self.statementName = statementName
    }

    /// True for kinds the caller should answer with 503: ``Kind/connectionUnavailable``,
    /// ``Kind/queryCanceled`` and ``Kind/lockNotAvailable``.
    public var isUnavailable: Bool {
        switch kind {
        case .connectionUnavailable, .queryCanceled, .lockNotAvailable: true
        default: false
        }
    }

    /// True when the whole transaction may be retried: ``Kind/serializationFailure`` and
    /// ``Kind/deadlockDetected``.
    public var isRetryable: Bool {
        kind == .serializationFailure || kind == .deadlockDetected
    }

    /// True for SQLSTATE 55006 (object_in_use): for one, a replication slot that another
    /// connection is streaming (``LogicalReplicationStream``).
    public var isObjectInUse: Bool {
        sqlState == .objectInUse
    }

    /// Kind, SQLSTATE and statement name only: no message, detail or data.
    public var description: String {
        var text = "PostgresError.\(kind)"
        if let sqlState { text += " (SQLSTATE \(sqlState))" }
        if let statementName { text += " in statement \"\(statementName)\"" }
        return text
    }

    /// ``description`` plus the server's message, detail and constraint, which may quote data.
    public var debugDescription: String {
        var text = description + ": \(message)"
        if let detail { text += " — detail: \(detail)" }
        if let constraint { text += " — constraint: \(constraint)" }
        return text
    }

    /// The kind the service acts on for a SQLSTATE (docs/design.md §5.2).
    static func kind(for state: SQLState) -> Kind {
        switch state {
        case .uniqueViolation: .uniqueViolation
        case .checkViolation: .checkViolation
        case .serializationFailure: .serializationFailure
        case .deadlockDetected: .deadlockDetected
        case .queryCanceled: .queryCanceled
        case .lockNotAvailable: .lockNotAvailable
        case .connectionException, .adminShutdown, .crashShutdown, .cannotConnectNow: .connectionUnavailable
        default: .other
        }
    }
}
