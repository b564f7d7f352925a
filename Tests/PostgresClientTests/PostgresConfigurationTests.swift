import PostgresClient
import Testing

@Suite struct PostgresConfigurationTests {
    @Test func urlGetsSafeDefaults() throws {
        let configuration = try PostgresConfiguration(url: "postgres://postgres@127.0.0.1:55433/profiles")
        #expect(configuration.value(for: "host") == "127.0.0.1")
        #expect(configuration.value(for: "port") == "55433")
        #expect(configuration.value(for: "dbname") == "profiles")
        #expect(configuration.value(for: "user") == "postgres")
        #expect(configuration.value(for: "connect_timeout") == "3")
        #expect(configuration.value(for: "keepalives") == "1")
        #expect(configuration.value(for: "keepalives_idle") == "30")
        #expect(configuration.value(for: "keepalives_interval") == "10")
        #expect(configuration.value(for: "keepalives_count") == "3")
        #expect(configuration.value(for: "tcp_user_timeout") == "10000")
        #expect(configuration.value(for: "application_name") == "profile-service")
        #expect(configuration.value(for: "options") == "-c statement_timeout=5000 -c lock_timeout=2000")
        #expect(configuration.description.contains("options='-c statement_timeout=5000 -c lock_timeout=2000'"))
    }

    @Test func postgresqlSchemeAndArgumentsAreUsed() throws {
        let configuration = try PostgresConfiguration(
            url: "postgresql://db.internal/profiles", applicationName: "worker", statementTimeout: .milliseconds(100),
            lockTimeout: .milliseconds(250), connectTimeout: .milliseconds(1500))
        #expect(configuration.value(for: "connect_timeout") == "2")
        #expect(configuration.value(for: "application_name") == "worker")
        #expect(configuration.value(for: "options") == "-c statement_timeout=100 -c lock_timeout=250")
    }

    @Test func userValuesInURLAreKept() throws {
        let configuration = try PostgresConfiguration(
            url: "postgres://u@h:5432/d?connect_timeout=10&application_name=mine&keepalives_idle=5"
                + "&options=-c%20statement_timeout%3D900")
        #expect(configuration.value(for: "connect_timeout") == "10")
        #expect(configuration.value(for: "application_name") == "mine")
        #expect(configuration.value(for: "keepalives_idle") == "5")
        #expect(configuration.value(for: "keepalives_interval") == "10")
        #expect(configuration.value(for: "options") == "-c statement_timeout=900 -c lock_timeout=2000")
    }

    @Test func userValuesInConninfoAreKept() throws {
        let configuration = try PostgresConfiguration(
            url: "host=127.0.0.1 port=55433 dbname=profiles tcp_user_timeout=3000 "
                + "options='-c lock_timeout=50 -c statement_timeout=70'")
        #expect(configuration.value(for: "port") == "55433")
        #expect(configuration.value(for: "tcp_user_timeout") == "3000")
        #expect(configuration.value(for: "connect_timeout") == "3")
        #expect(configuration.value(for: "options") == "-c lock_timeout=50 -c statement_timeout=70")
        #expect(configuration.description.contains("tcp_user_timeout=3000"))
        #expect(configuration.description.contains("options='-c lock_timeout=50 -c statement_timeout=70'"))
    }

    @Test func throughAPoolerNoStartupOptionsAreSent() throws {
        let pooled = try PostgresConfiguration(
            url: "postgres://u@pgbouncer:6432/d", statementTimeout: .milliseconds(700), pooled: true)
        #expect(pooled.isPooled)
        #expect(pooled.value(for: "options") == nil, "PgBouncer refuses startup options")
        #expect(pooled.responseDeadline == .milliseconds(1700), "the client-side deadline still holds")
        #expect(pooled.value(for: "connect_timeout") == "3")
        let direct = try PostgresConfiguration(url: "postgres://u@db:5432/d")
        #expect(!direct.isPooled)
        #expect(direct.value(for: "options") != nil)
    }

    @Test func aPasswordFromAFileReplacesTheURLsAndIsRedacted() throws {
        let configuration = try PostgresConfiguration(url: "postgres://alice:old@127.0.0.1/profiles")
            .withPassword("from file")
        #expect(configuration.value(for: "password") == "from file")
        #expect(!configuration.description.contains("from file") && !configuration.description.contains("old"))
    }

    @Test func passwordIsRedacted() throws {
        let fromURL = try PostgresConfiguration(url: "postgres://alice:s3cr%27et@127.0.0.1/profiles")
        #expect(fromURL.value(for: "password") == "s3cr'et")
        #expect(fromURL.description.contains("password=********"))
        #expect(!fromURL.description.contains("s3cr"))
        let fromConninfo = try PostgresConfiguration(url: "host=h user=alice password='hunter 2'")
        #expect(fromConninfo.description.contains("password=********"))
        #expect(!fromConninfo.description.contains("hunter"))
    }

    @Test(arguments: [
        "postgres://u@h:5432/d?no_such_option=1",
        "postgresql://[::1",
        "host=h nonsense",
        "host=h bogus_keyword=1",
        "http//not a url",
    ])
    func malformedStringsAreInvalidConfiguration(url: String) {
        let error = #expect(throws: PostgresError.self) { try PostgresConfiguration(url: url) }
        #expect(error?.kind == .invalidConfiguration)
        #expect(error?.sqlState == nil)
        #expect(error?.isUnavailable == false)
    }
}
