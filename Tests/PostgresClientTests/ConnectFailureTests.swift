import PostgresClient
import Testing

/// Which failed connects the service gives up on at start (docs/configuration.md, `--database-url`):
/// libpq's own messages, as PostgreSQL 15 and libpq 15 word them.
@Suite struct ConnectFailureTests {
    func failure(_ message: String) -> PostgresError {
        PostgresError(kind: .connectionUnavailable, message: message)
    }

    @Test(arguments: [
        #"connection to server at "127.0.0.1", port 5432 failed: FATAL:  password authentication failed for user "app""#,
        #"connection to server at "127.0.0.1", port 5432 failed: SSL error: certificate verify failed"#,
        #"connection to server at "10.0.0.5", port 5432 failed: server certificate for "db.internal" does not match host name "10.0.0.5""#,
        #"connection to server at "127.0.0.1", port 5432 failed: FATAL:  database "profilez" does not exist"#,
        #"connection to server at "127.0.0.1", port 5432 failed: FATAL:  role "nobody" does not exist"#,
        #"connection to server at "127.0.0.1", port 5432 failed: FATAL:  no pg_hba.conf entry for host "127.0.0.1", user "app", database "profiles", no encryption"#,
        #"connection to server at "127.0.0.1", port 5432 failed: fe_sendauth: no password supplied"#,
        #"root certificate file "/nope/ca.crt" does not exist"#,
    ])
    func retryingCannotFix(_ message: String) {
        #expect(failure(message).isPermanentConnectFailure)
    }

    @Test(arguments: [
        "connection to server at \"127.0.0.1\", port 5432 failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?",
        #"connection to server at "127.0.0.1", port 5432 failed: FATAL:  the database system is starting up"#,
        #"connection to server at "127.0.0.1", port 5432 failed: FATAL:  sorry, too many clients already"#,
        #"connection to server at "127.0.0.1", port 5432 failed: timeout expired"#,
        "PostgreSQL did not answer within 6000 ms",
    ])
    func retryingMayFix(_ message: String) {
        #expect(!failure(message).isPermanentConnectFailure)
    }

    @Test func onlyConnectionFailuresCount() {
        let denied = PostgresError(kind: .other, message: #"permission denied for database "profiles""#)
        #expect(!denied.isPermanentConnectFailure)
    }
}
