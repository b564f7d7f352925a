import Foundation
import MemcachedClient
import Testing
import TestSupport

extension LiveMemcachedTests {
    /// Two nodes: placement, per-node stats and flush, a node killed and restarted.
    @Suite struct MemcachedClusterTests {
        @Test func keysSpreadAcrossBothNodes() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let servers = try LiveMemcachedTests.configuration().servers
            try #require(servers.count == 2)
            // flush_all invalidates lazily (curr_items keeps counting flushed items until they are
            // touched), so compare each node's total_items before and after.
            var before: [MemcachedServer: Int] = [:]
            for server in servers {
                before[server] = try #require(Int(connection.stats(server: server)?["total_items"] ?? ""))
            }

            let prefix = LiveMemcachedTests.uniqueKey()
            var expected: [MemcachedServer: Int] = [:]
            for index in 0..<200 {
                let key = "\(prefix):\(index)"
                #expect(connection.set(key, value: Array("v\(index)".utf8)) == .stored)
                expected[try #require(connection.server(forKey: key)), default: 0] += 1
            }
            // Each node's own `stats` agrees with server(forKey:), and both got keys.
            var total = 0
            for server in servers {
                let stats = try #require(connection.stats(server: server))
                let stored = try #require(Int(stats["total_items"] ?? "")) - before[server]!
                let current = try #require(Int(stats["curr_items"] ?? ""))
                print("memcached \(server): \(stored) of 200 keys stored (server(forKey:) expects \(expected[server] ?? 0)), curr_items \(current)")
                #expect(stored == expected[server] ?? 0)
                #expect(stored > 20)
                #expect(current >= stored)
                #expect(stats["pid"] != nil)
                total += stored
            }
            #expect(total == 200)
        }

        @Test func flushClearsOnlyOneNode() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let servers = try LiveMemcachedTests.configuration().servers
            let (onFirst, onSecond) = try keys(on: servers, connection, count: 10)
            for key in onFirst + onSecond { #expect(connection.set(key, value: [1]) == .stored) }

            #expect(connection.flush(server: servers[0]) == nil)
            for key in onFirst { #expect(connection.get(key) == .miss) }
            for key in onSecond { #expect(connection.get(key) != .miss) }

            let stranger = MemcachedServer(host: "127.0.0.1", port: 1)
            #expect(connection.flush(server: stranger)?.code == .invalidConfiguration)
            #expect(connection.stats(server: stranger) == nil)
        }

        @Test func serverForKeyIsStable() throws {
            let first = try LiveMemcachedTests.connection()
            let second = try LiveMemcachedTests.connection()
            defer {
                first.close()
                second.close()
            }
            let servers = try LiveMemcachedTests.configuration().servers
            for index in 0..<500 {
                let key = "stable:\(index)"
                let server = first.server(forKey: key)
                #expect(server != nil)
                #expect(servers.contains(server!))
                #expect(first.server(forKey: key) == server)
                #expect(second.server(forKey: key) == server)
            }
            #expect(first.server(forKey: "") == nil)
        }

        @Test func aKilledNodeFailsFastAndRecovers() throws {
            let retryTimeout = Duration.seconds(1)
            let connection = try LiveMemcachedTests.connection(retryTimeout: retryTimeout)
            defer { connection.close() }
            let servers = try LiveMemcachedTests.configuration().servers
            let (alive, doomed) = try keys(on: servers, connection, count: 10)
            for key in alive + doomed { #expect(connection.set(key, value: [1]) == .stored) }
            let owners = Dictionary(uniqueKeysWithValues: (alive + doomed).map { ($0, connection.server(forKey: $0)) })

            try #require(try LiveMemcachedTests.deps("stop-memcached", "2") == 0)
            defer { _ = try? LiveMemcachedTests.deps("start-memcached", "2") }
            #expect(!TestEnvironment.isListening(host: servers[1].host, port: servers[1].port))

            // Operations on the dead node's keys fail, and fast.
            var timings: [(String, Duration, MemcachedError?)] = []
            let clock = ContinuousClock()
            for (index, key) in doomed.enumerated() {
                var outcome: MemcachedError?
                let elapsed = clock.measure {
                    switch index % 3 {
                    case 0:
                        if case .failure(let error) = connection.get(key) { outcome = error }
                    case 1:
                        if case .failure(let error) = connection.set(key, value: [2]) { outcome = error }
                    default:
                        if case .failure(let error) = connection.delete(key) { outcome = error }
                    }
                }
                timings.append((["get", "set", "delete"][index % 3], elapsed, outcome))
                #expect(outcome != nil, "operation \(index) on a dead node's key did not fail")
                #expect(elapsed < .seconds(2))
            }
            for (operation, elapsed, error) in timings {
                print("dead node: \(operation) failed in \(elapsed) with \(error.map { "\($0)" } ?? "no error")")
            }
            #expect(timings.first?.2?.code == .connectionFailure)
            #expect(timings.last?.2?.code == .serverMarkedDead)
            // The other node keeps working, and the ring does not move keys.
            for key in alive {
                if case .hit = connection.get(key) {} else { Issue.record("key on the live node did not hit") }
                #expect(connection.set(key, value: [3]) == .stored)
            }
            for key in alive + doomed { #expect(connection.server(forKey: key) == owners[key]!) }

            // Restarted: the same connection uses it again once the retry timeout has passed.
            try #require(try LiveMemcachedTests.deps("start-memcached", "2") == 0)
            let restarted = clock.now
            var recovered: Duration?
            while clock.now - restarted < .seconds(10) {
                if case .stored = connection.set(doomed[0], value: [4]) {
                    recovered = clock.now - restarted
                    break
                }
                Thread.sleep(forTimeInterval: 0.05)
            }
            print("dead node: recovered \(recovered.map { "\($0)" } ?? "never") after restart (retryTimeout \(retryTimeout))")
            #expect(recovered != nil)
            // A restarted memcached is empty: the old keys miss, new writes and reads work.
            #expect(connection.get(doomed[1]) == .miss)
            #expect(connection.set(doomed[1], value: [5]) == .stored)
            if case .hit(let item) = connection.get(doomed[1]) { #expect(item.value == [5]) } else {
                Issue.record("expected a hit on the restarted node")
            }
            for key in alive { if case .hit = connection.get(key) {} else { Issue.record("live key lost") } }
        }

        /// libmemcached keeps a failed node in timeout per handle until a connect succeeds, which
        /// it does not try before the retry timeout; `reconnect()` forgets that at once, and
        /// `ping(server:)` makes a real round trip to one node.
        @Test func reconnectUsesARestartedNodeAtOnce() throws {
            let connection = try LiveMemcachedTests.connection(retryTimeout: .seconds(5))
            defer { connection.close() }
            let servers = try LiveMemcachedTests.configuration().servers
            let (_, doomed) = try keys(on: servers, connection, count: 1)
            #expect(connection.ping(server: servers[1]) == nil)

            try #require(try LiveMemcachedTests.deps("stop-memcached", "2") == 0)
            var started = false
            defer { if !started { _ = try? LiveMemcachedTests.deps("start-memcached", "2") } }
            #expect(connection.ping(server: servers[1]) != nil, "ping reaches the node, not a cached answer")
            for _ in 0..<3 { _ = connection.get(doomed[0]) }
            guard case .failure(let error) = connection.get(doomed[0]) else {
                Issue.record("a stopped node answered")
                return
            }
            #expect(error.code == .serverMarkedDead)

            try #require(try LiveMemcachedTests.deps("start-memcached", "2") == 0)
            started = true
            if case .failure(let error) = connection.get(doomed[0]) {
                #expect(error.code == .serverMarkedDead, "still in this handle's 5 s timeout")
            } else {
                Issue.record("expected the handle to hold the node in timeout")
            }
            connection.reconnect()
            #expect(connection.get(doomed[0]) == .miss, "used at once after reconnect()")
            #expect(connection.set(doomed[0], value: [1]) == .stored)
            #expect(connection.ping(server: servers[1]) == nil)
        }

        /// Per-node flushes and stats reuse one handle (and so one socket) per node.
        @Test func flushesReuseOneConnectionPerNode() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let server = try LiveMemcachedTests.configuration().servers[0]
            let observer = try LiveMemcachedTests.connection()
            defer { observer.close() }
            #expect(connection.flush(server: server) == nil)
            let before = try #require(Int(observer.stats(server: server)?["total_connections"] ?? ""))
            for _ in 0..<10 { #expect(connection.flush(server: server) == nil) }
            #expect(connection.stats(server: server) != nil)
            let after = try #require(Int(observer.stats(server: server)?["total_connections"] ?? ""))
            #expect(after == before, "ten flushes and a stats opened \(after - before) connections")
        }

        /// A node that accepts connections but never answers (SIGSTOP): each operation on its keys
        /// times out after the poll timeout. libmemcached 1.1.4 does not put a node in timeout for
        /// poll timeouts (only for connect failures), so every one waits the poll timeout.
        /// SIGCONT brings it back at once.
        @Test func aHungNodeTimesOutWithinThePollTimeout() throws {
            let connection = try LiveMemcachedTests.connection(retryTimeout: .seconds(1))
            defer { connection.close() }
            let servers = try LiveMemcachedTests.configuration().servers
            let (alive, hung) = try keys(on: servers, connection, count: 6)
            for key in alive + hung { #expect(connection.set(key, value: [1]) == .stored) }

            let stateDirectory =
                TestEnvironment.variable("PROFILE_STATE_DIR") ?? TestEnvironment.repositoryRoot.appendingPathComponent(".state").path
            let pidText = try String(contentsOfFile: "\(stateDirectory)/memcached/\(servers[1].port).pid", encoding: .utf8)
            let pid = try #require(pid_t(pidText.trimmingCharacters(in: .whitespacesAndNewlines)))
            try TestEnvironment.freeze(pid)
            var continued = false
            defer { if !continued { kill(pid, SIGCONT) } }

            let clock = ContinuousClock()
            var codes: [MemcachedError.Code] = []
            for key in hung {
                var code: MemcachedError.Code?
                let elapsed = clock.measure {
                    if case .failure(let error) = connection.get(key) { code = error.code }
                }
                print("hung node: get failed in \(elapsed) with \(code.map { "\($0)" } ?? "no error")")
                #expect(code != nil)
                #expect(elapsed < .seconds(2))
                if let code { codes.append(code) }
            }
            #expect(codes == Array(repeating: .timeout, count: hung.count))
            for key in alive { if case .hit = connection.get(key) {} else { Issue.record("live key failed") } }

            kill(pid, SIGCONT)
            continued = true
            let resumed = clock.now
            var recovered: Duration?
            while clock.now - resumed < .seconds(10) {
                if case .hit = connection.get(hung[0]) {
                    recovered = clock.now - resumed
                    break
                }
                Thread.sleep(forTimeInterval: 0.05)
            }
            print("hung node: recovered \(recovered.map { "\($0)" } ?? "never") after SIGCONT (retryTimeout 1 s)")
            #expect(recovered != nil)
        }

        /// `count` keys owned by each of the first two servers.
        private func keys(
            on servers: [MemcachedServer], _ connection: MemcachedConnection, count: Int
        ) throws -> ([String], [String]) {
            try #require(servers.count == 2)
            let prefix = LiveMemcachedTests.uniqueKey()
            var first: [String] = []
            var second: [String] = []
            var index = 0
            while first.count < count || second.count < count {
                let key = "\(prefix):\(index)"
                index += 1
                switch connection.server(forKey: key) {
                case servers[0] where first.count < count: first.append(key)
                case servers[1] where second.count < count: second.append(key)
                default: break
                }
            }
            return (first, second)
        }
    }
}
