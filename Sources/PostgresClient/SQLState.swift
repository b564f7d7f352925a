/// A five-character SQLSTATE code reported by PostgreSQL.
///
/// `SQLState` is an open set: any code the server sends can be represented, and the most useful
/// ones have names. The first two characters are the error class; a code whose last three
/// characters are `000` names a whole class, so as a pattern it matches every code of that class:
///
/// ```swift
/// switch error.sqlState {
/// case SQLState.uniqueViolation?: ...        // exactly 23505
/// case SQLState.connectionException?: ...    // any 08xxx
/// default: ...
/// }
/// ```
///
/// Related libpq documentation: <https://www.postgresql.org/docs/15/errcodes-appendix.html>
/// ("Applications should test the error class … rather than the specific code").
public struct SQLState: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The five-character code, e.g. `"23505"`.
    public let rawValue: String

    /// Creates a code from its five characters.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// Creates a code from a string literal, e.g. `let code: SQLState = "23505"`.
    public init(stringLiteral value: String) {
        self.rawValue = value
    }

    /// The error class: the first two characters (`"23"` for `23505`).
    public var errorClass: String { String(rawValue.prefix(2)) }

    /// Whether this code names a whole class (its last three characters are `000`).
    public var isClass: Bool { rawValue.count == 5 && rawValue.hasSuffix("000") }

    public var description: String { rawValue }

    /// Matches `value` against `pattern`: equal codes match, and a class code (`08000`) matches
    /// every code of its class (`08006`).
    public static func ~= (pattern: SQLState, value: SQLState) -> Bool {
        if pattern.isClass { return pattern.errorClass == value.errorClass }
        return pattern == value
    }

    /// Matches a thrown ``PostgresError`` by its SQLSTATE, so that
    /// `catch SQLState.uniqueViolation { … }` works.
    public static func ~= (pattern: SQLState, value: any Error) -> Bool {
        guard let error = value as? PostgresError, let state = error.sqlState else { return false }
        return pattern ~= state
    }
}

extension SQLState {
    // Class 00 and 02
    public static let successfulCompletion: SQLState = "00000"
    public static let noData: SQLState = "02000"
    // Class 08 — Connection Exception
    public static let connectionException: SQLState = "08000"
    public static let connectionDoesNotExist: SQLState = "08003"
    public static let connectionFailure: SQLState = "08006"
    public static let sqlClientUnableToEstablishSQLConnection: SQLState = "08001"
    // Class 22 — Data Exception
    public static let dataException: SQLState = "22000"
    public static let invalidTextRepresentation: SQLState = "22P02"
    public static let numericValueOutOfRange: SQLState = "22003"
    public static let stringDataRightTruncation: SQLState = "22001"
    // Class 23 — Integrity Constraint Violation
    public static let integrityConstraintViolation: SQLState = "23000"
    public static let notNullViolation: SQLState = "23502"
    public static let foreignKeyViolation: SQLState = "23503"
    public static let uniqueViolation: SQLState = "23505"
    public static let checkViolation: SQLState = "23514"
    public static let exclusionViolation: SQLState = "23P01"
    // Class 25 — Invalid Transaction State
    public static let invalidTransactionState: SQLState = "25000"
    public static let inFailedSQLTransaction: SQLState = "25P02"
    // Class 26 — Invalid SQL Statement Name (a prepared statement that does not exist)
    public static let invalidSQLStatementName: SQLState = "26000"
    // Class 40 — Transaction Rollback
    public static let transactionRollback: SQLState = "40000"
    public static let serializationFailure: SQLState = "40001"
    public static let deadlockDetected: SQLState = "40P01"
    // Class 42 — Syntax Error or Access Rule Violation
    public static let syntaxErrorOrAccessRuleViolation: SQLState = "42000"
    public static let syntaxError: SQLState = "42601"
    public static let undefinedTable: SQLState = "42P01"
    public static let undefinedColumn: SQLState = "42703"
    public static let duplicatePreparedStatement: SQLState = "42P05"
    public static let undefinedObject: SQLState = "42704"
    public static let duplicateObject: SQLState = "42710"
    // Class 53 — Insufficient Resources
    public static let insufficientResources: SQLState = "53000"
    public static let tooManyConnections: SQLState = "53300"
    // Class 55 — Object Not In Prerequisite State
    public static let objectNotInPrerequisiteState: SQLState = "55000"
    /// A replication slot another connection is streaming, among others.
    public static let objectInUse: SQLState = "55006"
    public static let lockNotAvailable: SQLState = "55P03"
    // Class 57 — Operator Intervention
    public static let operatorIntervention: SQLState = "57000"
    public static let queryCanceled: SQLState = "57014"
    public static let adminShutdown: SQLState = "57P01"
    public static let crashShutdown: SQLState = "57P02"
    public static let cannotConnectNow: SQLState = "57P03"
    // Class XX — Internal Error
    public static let internalError: SQLState = "XX000"
}
