/// A value sent as a text-format statement parameter.
///
/// The text must be what PostgreSQL's input function for the parameter's type accepts
/// (`42`, `t`, `hello`). Pass `nil` in the parameter list for SQL `NULL`.
public protocol PostgresEncodable {
    /// The value in PostgreSQL's text format.
    var postgresText: String { get }
}

extension String: PostgresEncodable {
    public var postgresText: String { self }
}

extension Int: PostgresEncodable {
    public var postgresText: String { String(self) }
}

extension Int64: PostgresEncodable {
    public var postgresText: String { String(self) }
}

extension Int32: PostgresEncodable {
    public var postgresText: String { String(self) }
}

extension Bool: PostgresEncodable {
    public var postgresText: String { self ? "t" : "f" }
}

extension Double: PostgresEncodable {
    /// Swift's shortest round-tripping form; `inf`, `-inf` and `nan` become PostgreSQL's spellings.
    public var postgresText: String {
        if isNaN { return "NaN" }
        if isInfinite { return self > 0 ? "Infinity" : "-Infinity" }
        return String(self)
    }
}
