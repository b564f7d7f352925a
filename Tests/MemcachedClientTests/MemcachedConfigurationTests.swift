import MemcachedClient
import Testing

@Suite struct MemcachedConfigurationTests {
    @Test func parsesAGoodList() throws {
        let configuration = try MemcachedConfiguration(servers: "127.0.0.1:21211, localhost:21212 ,cache-b.internal:11211")
        #expect(
            configuration.servers == [
                MemcachedServer(host: "127.0.0.1", port: 21211), MemcachedServer(host: "localhost", port: 21212),
                MemcachedServer(host: "cache-b.internal", port: 11211),
            ])
        #expect(configuration.serverFailureLimit == 2)
        #expect(configuration.retryTimeout == .seconds(2))
        #expect(configuration.servers[0].description == "127.0.0.1:21211")
    }

    @Test func buildsTheConfigurationString() throws {
        let configuration = try MemcachedConfiguration(
            servers: "127.0.0.1:21211,127.0.0.1:21212", connectTimeout: .milliseconds(50),
            pollTimeout: .milliseconds(75), retryTimeout: .milliseconds(1500), serverFailureLimit: 3)
        let string = configuration.configurationString
        #expect(string.contains("--SERVER=127.0.0.1:21211 --SERVER=127.0.0.1:21212"))
        #expect(string.contains("--DISTRIBUTION=consistent"))
        #expect(string.contains("--TCP-NODELAY"))
        #expect(string.contains("--SUPPORT-CAS"))
        #expect(string.contains("--CONNECT-TIMEOUT=50"))
        #expect(string.contains("--POLL-TIMEOUT=75"))
        #expect(string.contains("--RETRY-TIMEOUT=2"))  // whole seconds, rounded up
        // libmemcached 1.1.4's parser has no --SERVER-FAILURE-LIMIT: the connection sets the behavior.
        #expect(!string.contains("SERVER-FAILURE-LIMIT"))
        #expect(configuration.serverFailureLimit == 3)
        #expect(!string.contains("REMOVE-FAILED-SERVERS"))
        #expect(!string.contains("REMOVE_FAILED_SERVERS"))
        #expect(!string.contains("BINARY-PROTOCOL"))
    }

    @Test func defaultsAreShort() throws {
        let string = try MemcachedConfiguration(servers: "127.0.0.1:21211").configurationString
        #expect(string.contains("--CONNECT-TIMEOUT=100"))
        #expect(string.contains("--POLL-TIMEOUT=100"))
        #expect(string.contains("--RETRY-TIMEOUT=2"))
    }

    @Test(arguments: [
        "", "   ", "127.0.0.1", "127.0.0.1:", ":11211", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:abc",
        "127.0.0.1:-1", "127.0.0.1:11211,", ",127.0.0.1:11211", "127.0.0.1:11211,,127.0.0.1:11212",
        "127.0.0.1:11211,127.0.0.1:11211", "::1:11211", "[::1]:11211", "bad host:11211", "a:11211",
    ])
    func rejectsABadList(_ list: String) {
        let error = #expect(throws: MemcachedError.self) { try MemcachedConfiguration(servers: list) }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.isEmpty == false)
        #expect(error?.message.contains("\n") == false)
    }

    @Test func namesTheBadEntry() {
        let error = #expect(throws: MemcachedError.self) {
            try MemcachedConfiguration(servers: "127.0.0.1:21211,cache-b:99999")
        }
        #expect(error?.message.contains("cache-b:99999") == true)
        let missing = #expect(throws: MemcachedError.self) {
            try MemcachedConfiguration(servers: "127.0.0.1:21211,cache-b")
        }
        #expect(missing?.message.contains("cache-b") == true)
        let duplicate = #expect(throws: MemcachedError.self) {
            try MemcachedConfiguration(servers: "host-a:1,host-b:2,host-a:1")
        }
        #expect(duplicate?.message.contains("host-a:1") == true)
        // Rejected by libmemcached's own parser, still named.
        let parser = #expect(throws: MemcachedError.self) {
            try MemcachedConfiguration(servers: "127.0.0.1:21211,x:11211")
        }
        #expect(parser?.message.contains("x:11211") == true)
    }

    @Test func rejectsBadOptions() {
        for make in [
            { try MemcachedConfiguration(servers: "localhost:1", connectTimeout: .zero) },
            { try MemcachedConfiguration(servers: "localhost:1", pollTimeout: .microseconds(10)) },
            { try MemcachedConfiguration(servers: "localhost:1", retryTimeout: .milliseconds(500)) },
            { try MemcachedConfiguration(servers: "localhost:1", serverFailureLimit: 0) },
        ] as [() throws -> MemcachedConfiguration] {
            let error = #expect(throws: MemcachedError.self) { try make() }
            #expect(error?.code == .invalidConfiguration)
        }
    }
}
