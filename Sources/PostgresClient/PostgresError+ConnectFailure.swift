extension PostgresError {
    /// Whether a failed connect is one that retrying cannot fix: the server refused who we are
    /// (password, role, `pg_hba.conf`), the certificate did not verify, the database does not
    /// exist, or the conninfo asks for what this libpq cannot do. A refused or timed-out
    /// connection, a server starting or shutting down, or too many clients are worth retrying.
    ///
    /// libpq reports a failed connect as text only (no SQLSTATE reaches the client before a
    /// session exists), so this matches its messages and the server's, in English: a server
    /// set to another `lc_messages` makes every failure look transient, which is the safe side
    /// (the service serves on and keeps retrying, logging the reason).
    public var isPermanentConnectFailure: Bool {
        guard kind == .connectionUnavailable else { return false }
        return Self.permanentConnectFailures.contains { message.contains($0) }
    }

    /// Whether a connection pooler refused the session's startup settings (PgBouncer:
    /// "unsupported startup parameter: options"): the URL reaches a pooler, not PostgreSQL.
    public var isPoolerRefusingStartupParameters: Bool {
        kind == .connectionUnavailable && message.contains("unsupported startup parameter")
    }

    static let permanentConnectFailures = [
        "password authentication failed",
        "SCRAM authentication failed",
        "no password supplied",
        "no pg_hba.conf entry",
        "role \"",  // role "x" does not exist
        "does not exist",  // database "x" does not exist
        "certificate verify failed",
        "server certificate for",  // … does not match host name
        "root certificate file",  // … does not exist
        "could not read root certificate",
        "certificate present, but not private key",
        "SSL is not enabled on the server",
        "server does not support SSL",
        "invalid sslmode value",
        "is not permitted to log in",
        "permission denied for database",
    ]
}
