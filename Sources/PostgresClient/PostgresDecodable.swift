/// A value read from a text-format result column.
///
/// Implementations throw a ``PostgresDecodingError/Code`` (usually
/// ``PostgresDecodingError/Code/typeMismatch``); ``PostgresRow/decode(_:as:file:line:)`` adds the
/// column, its index, the target type and the call site.
public protocol PostgresDecodable {
    /// Decodes PostgreSQL's text format (`42`, `t`, `hello`). Never called for SQL `NULL`.
    init(postgresText: String) throws
}

extension String: PostgresDecodable {
    public init(postgresText: String) { self = postgresText }
}

extension Int: PostgresDecodable {
    public init(postgresText: String) throws {
        guard let value = Int(postgresText) else { throw PostgresDecodingError.Code.typeMismatch }
        self = value
    }
}

extension Int64: PostgresDecodable {
    public init(postgresText: String) throws {
        guard let value = Int64(postgresText) else { throw PostgresDecodingError.Code.typeMismatch }
        self = value
    }
}

extension Int32: PostgresDecodable {
    public init(postgresText: String) throws {
        guard let value = Int32(postgresText) else { throw PostgresDecodingError.Code.typeMismatch }
        self = value
    }
}

extension Bool: PostgresDecodable {
    /// PostgreSQL's text output for `boolean` is `t` or `f`; `true` and `false` are accepted too.
    public init(postgresText: String) throws {
        switch postgresText {
        case "t", "true": self = true
        case "f", "false": self = false
        default: throw PostgresDecodingError.Code.typeMismatch
        }
    }
}

extension Double: PostgresDecodable {
    public init(postgresText: String) throws {
        switch postgresText {
        case "NaN": self = .nan
        case "Infinity": self = .infinity
        case "-Infinity": self = -.infinity
        default:
            guard let value = Double(postgresText) else { throw PostgresDecodingError.Code.typeMismatch }
            self = value
        }
    }
}
