internal import CLibPQ
import ServiceRuntime

/// Where and how to connect: a parsed connection string with the service's safe defaults added.
///
/// Accepts a `postgres://` or `postgresql://` URL or a `key=value` conninfo, parsed by libpq's own
/// `PQconninfoParse`, and adds each of these unless the string already sets it:
///
/// | keyword | default |
/// | --- | --- |
/// | `connect_timeout` | `connectTimeout`, in whole seconds (3) |
/// | `keepalives`, `keepalives_idle`, `keepalives_interval`, `keepalives_count` | 1, 30, 10, 3 |
/// | `tcp_user_timeout` | 10000 (ms) |
/// | `application_name` | `applicationName` |
/// | `options` | `-c statement_timeout=5000 -c lock_timeout=2000`, each added only if absent; none through a pooler |
///
/// Through a connection pooler in transaction mode (``isPooled``) a session is not the
/// client's: a pooler refuses startup `options` (PgBouncer: "unsupported startup parameter"), and
/// a named prepared statement of one client meets another's server connection (42P05, 26000).
/// So a pooled configuration adds no `options` (the timeouts are the role's or database's own
/// settings; the client-side ``responseDeadline`` still holds) and its connections run every
/// statement unnamed, parsed with its parameters in the same round trip.
///
/// ```swift
/// let configuration = try PostgresConfiguration(url: "postgres://postgres@127.0.0.1:5432/profiles")
/// ```
///
/// ``description`` prints the conninfo with any password replaced by `********`.
///
/// Related libpq documentation: <https://www.postgresql.org/docs/15/libpq-connect.html#LIBPQ-CONNSTRING>
public struct PostgresConfiguration: Sendable, CustomStringConvertible {
    /// Keyword/value pairs as `PQconninfoParse` lists them, then the defaults added.
    private(set) var parameters: [(keyword: String, value: String)]
    /// How long a call waits for the server's answer before it gives up on the session
    /// (docs/design.md §5.3): `statement_timeout` plus one second, so that the server's own
    /// timeout normally answers first; this bound holds when the server cannot answer at all
    /// (stopped, partitioned). The connect is bounded by `connect_timeout`.
    public var responseDeadline: Duration
    /// Whether connections go through a pooler: no startup `options`, no named prepared statements.
    public let isPooled: Bool

    /// Parses `url` and adds the defaults it does not set.
    ///
    /// - Parameters:
    ///   - url: A `postgres://` / `postgresql://` URL or a `key=value` conninfo.
    ///   - applicationName: `application_name`, shown in `pg_stat_activity`.
    ///   - statementTimeout: `statement_timeout`, in milliseconds on the server.
    ///   - lockTimeout: `lock_timeout`, in milliseconds on the server.
    ///   - connectTimeout: `connect_timeout`, rounded up to whole seconds. libpq: "The minimum
    ///     allowed timeout is 2 seconds, therefore a value of 1 is interpreted as 2."
    ///   - pooled: `url` is a connection pooler's (``isPooled``): `statementTimeout` and
    ///     `lockTimeout` are not sent, only the client-side deadline is derived from the first.
    /// - Throws: ``PostgresError`` of kind ``PostgresError/Kind/invalidConfiguration`` when libpq
    ///   cannot parse `url`.
    public init(
        url: String, applicationName: String = "profile-service", statementTimeout: Duration = .seconds(5),
        lockTimeout: Duration = .seconds(2), connectTimeout: Duration = .seconds(3), pooled: Bool = false
    ) throws {
        var parameters = try Self.parse(url)
        func addIfAbsent(_ keyword: String, _ value: String) {
            if !parameters.contains(where: { $0.keyword == keyword }) { parameters.append((keyword, value)) }
        }
        let connectSeconds = max(1, (connectTimeout.milliseconds + 999) / 1000)
        addIfAbsent("connect_timeout", String(connectSeconds))
        addIfAbsent("keepalives", "1")
        addIfAbsent("keepalives_idle", "30")
        addIfAbsent("keepalives_interval", "10")
        addIfAbsent("keepalives_count", "3")
        addIfAbsent("tcp_user_timeout", "10000")
        addIfAbsent("application_name", applicationName)

        var settings: [String] = []
        let userOptions = parameters.first(where: { $0.keyword == "options" })?.value ?? ""
        if !userOptions.contains("statement_timeout") {
            settings.append("-c statement_timeout=\(statementTimeout.milliseconds)")
        }
        if !userOptions.contains("lock_timeout") {
            settings.append("-c lock_timeout=\(lockTimeout.milliseconds)")
        }
        if !settings.isEmpty && !pooled {
            if let index = parameters.firstIndex(where: { $0.keyword == "options" }) {
                let merged = ([userOptions] + settings).filter { !$0.isEmpty }.joined(separator: " ")
                parameters[index].value = merged
            } else {
                parameters.append(("options", settings.joined(separator: " ")))
            }
        }
        self.parameters = parameters
        isPooled = pooled
        responseDeadline = statementTimeout + .seconds(1)
    }

    /// This configuration with `-c name=value` server settings appended to `options`, for
    /// sessions that need a fixed setting (the change feed decodes timestamps in UTC, ISO style).
    public func addingSettings(_ settings: [(name: String, value: String)]) -> PostgresConfiguration {
        var copy = self
        let added = settings.map { "-c \($0.name)=\($0.value)" }.joined(separator: " ")
        if let index = copy.parameters.firstIndex(where: { $0.keyword == "options" }) {
            copy.parameters[index].value += " " + added
        } else {
            copy.parameters.append(("options", added))
        }
        return copy
    }

    /// This configuration with `password` set (replacing one the URL held): a password read from
    /// a file, so that it is in neither argv nor the environment.
    public func withPassword(_ password: String) -> PostgresConfiguration {
        var copy = self
        copy.parameters.removeAll { $0.keyword == "password" }
        copy.parameters.append(("password", password))
        return copy
    }

    /// This configuration with `application_name` set (replacing the URL's): how the sessions
    /// of one role in `pg_stat_activity` and `pg_stat_replication` say who they are.
    public func withApplicationName(_ name: String) -> PostgresConfiguration {
        var copy = self
        copy.parameters.removeAll { $0.keyword == "application_name" }
        copy.parameters.append(("application_name", name))
        return copy
    }

    /// The value of a conninfo keyword after parsing and defaults, e.g. `value(for: "connect_timeout")`.
    public func value(for keyword: String) -> String? {
        parameters.first(where: { $0.keyword == keyword })?.value
    }

    /// The conninfo with any password redacted.
    public var description: String {
        Self.conninfo(parameters, redactingPassword: true)
    }

    /// The full conninfo handed to `PQconnectdb`; contains the password.
    var conninfo: String {
        Self.conninfo(parameters, redactingPassword: false)
    }

    static func conninfo(_ parameters: [(keyword: String, value: String)], redactingPassword: Bool) -> String {
        parameters.map { keyword, value in
            let shown = redactingPassword && keyword == "password" ? "********" : value
            return "\(keyword)=\(quote(shown))"
        }.joined(separator: " ")
    }

    /// Quotes a conninfo value: "To write an empty value, or a value containing spaces, surround it
    /// with single quotes … Single quotes and backslashes within a value must be escaped with a
    /// backslash" (libpq, 34.1.1.1).
    private static func quote(_ value: String) -> String {
        let needsQuotes = value.isEmpty || value.contains { $0 == " " || $0 == "'" || $0 == "\\" || $0.isNewline }
        guard needsQuotes else { return value }
        var quoted = "'"
        for character in value {
            if character == "'" || character == "\\" { quoted.append("\\") }
            quoted.append(character)
        }
        return quoted + "'"
    }

    /// Runs `PQconninfoParse`, which "returns parsed connection options from the provided
    /// connection string … If errmsg is not NULL, then *errmsg is set to NULL on success, else to
    /// a malloc'd error string explaining the problem" (freed with `PQfreemem`); the option array
    /// is freed with `PQconninfoFree`. Options the string did not set have a NULL `val`.
    private static func parse(_ url: String) throws -> [(keyword: String, value: String)] {
        var errorMessage: UnsafeMutablePointer<CChar>? = nil
        guard let options = PQconninfoParse(url, &errorMessage) else {
            var message = "out of memory parsing the connection string"
            if let errorMessage {
                message = String(cString: errorMessage).trimmingTrailingNewlines()
                PQfreemem(errorMessage)
            }
            throw PostgresError(kind: .invalidConfiguration, message: message)
        }
        defer { PQconninfoFree(options) }
        var parameters: [(keyword: String, value: String)] = []
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val {
                parameters.append((String(cString: keyword), String(cString: value)))
            }
            option += 1
        }
        return parameters
    }
}

extension String {
    func trimmingTrailingNewlines() -> String {
        var text = self
        while text.last?.isNewline == true { text.removeLast() }
        return text
    }
}
