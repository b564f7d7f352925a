import Foundation
import MemcachedClient
import Testing
import TestSupport

extension LiveMemcachedTests {
    /// `get(many:)`: one round trip for keys on every node, answers matched to their keys, and a
    /// connection still in step afterwards, also when a node fails.
    @Suite struct MemcachedMultiGetTests {
        @Test func readsKeysOnEveryNodeAndReportsTheOthersAsMisses() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let prefix = LiveMemcachedTests.uniqueKey()
            let stored = (0..<40).map { "\(prefix):\($0)" }
            let missing = (0..<10).map { "\(prefix):missing:\($0)" }
            for (index, key) in stored.enumerated() {
                #expect(connection.set(key, value: Array("value \(index)".utf8), flags: UInt32(index)) == .stored)
            }
            let nodes = Set(stored.compactMap { connection.server(forKey: $0) })
            #expect(nodes.count == 2, "the keys live on both nodes")

            let items = try connection.get(many: missing + stored).get()
            #expect(items.count == stored.count)
            for (index, key) in stored.enumerated() {
                guard case .hit(let single) = connection.get(key) else {
                    Issue.record("\(key) not found by a single get")
                    continue
                }
                #expect(items[key] == single, "value, flags and CAS as a single get reads them")
                #expect(items[key]?.value == Array("value \(index)".utf8))
            }
            for key in missing { #expect(items[key] == nil) }
            #expect(try connection.get(many: []).get().isEmpty)
        }

        @Test func aRepeatedKeyIsAnsweredOnceAndTheConnectionStaysInStep() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let key = LiveMemcachedTests.uniqueKey()
            #expect(connection.set(key, value: [7]) == .stored)
            let items = try connection.get(many: [key, key, key]).get()
            #expect(items[key]?.value == [7])
            #expect(connection.set(key + ":next", value: [8]) == .stored)
            guard case .hit(let next) = connection.get(key + ":next") else {
                Issue.record("the next get was not answered for its own key")
                return
            }
            #expect(next.value == [8])
        }

        @Test func anInvalidKeyFailsBeforeAnyIO() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            guard case .failure(let error) = connection.get(many: [LiveMemcachedTests.uniqueKey(), "has space"]) else {
                Issue.record("a key with a space was sent")
                return
            }
            #expect(error.code == .invalidKey)
        }

        /// Two nodes that accept the request and never answer (SIGSTOP) must not read as "no
        /// entry": libmemcached polls both, gives up after the poll timeout and reports
        /// MEMCACHED_NOTFOUND. The read fails, names a silent node, and the connection reads the
        /// nodes' answers correctly once they are back (issue 25; docs/design.md §2.4).
        @Test func silentNodesFailTheReadInsteadOfReadingAsMisses() throws {
            let connection = try LiveMemcachedTests.connection(retryTimeout: .seconds(1))
            defer { connection.close() }
            let servers = try LiveMemcachedTests.configuration().servers
            let prefix = LiveMemcachedTests.uniqueKey()
            let keys = (0..<20).map { "\(prefix):\($0)" }
            #expect(Set(keys.compactMap { connection.server(forKey: $0) }).count == servers.count, "keys on every node")
            for key in keys { #expect(connection.set(key, value: [4, 2]) == .stored) }

            let pids = try servers.map { try TestEnvironment.memcachedPID(port: $0.port) }
            var frozen: [pid_t] = []
            defer { for pid in frozen { kill(pid, SIGCONT) } }
            for pid in pids {
                try TestEnvironment.freeze(pid)
                frozen.append(pid)
            }
            switch connection.get(many: keys) {
            case .success(let items):
                Issue.record("a multi-get that no node answered succeeded with \(items.count) of \(keys.count) keys")
            case .failure(let error):
                #expect(error.code == .timeout)
                #expect(error.node.map { servers.contains($0) } == true, "the failure names a silent node")
            }
            for pid in frozen { kill(pid, SIGCONT) }
            frozen = []

            // Back: every key is read again (after libmemcached's retry timeout at most).
            var items: [String: MemcachedItem] = [:]
            let deadline = ContinuousClock.now + .seconds(5)
            while ContinuousClock.now < deadline {
                if case .success(let read) = connection.get(many: keys), read.count == keys.count {
                    items = read
                    break
                }
                Thread.sleep(forTimeInterval: 0.05)
            }
            #expect(items.count == keys.count)
            #expect(items.values.allSatisfy { $0.value == [4, 2] })
        }

        @Test func aFailedNodeFailsTheWholeReadAndLeavesTheOtherInStep() throws {
            let live = try LiveMemcachedTests.configuration().servers[0]
            let configuration = try MemcachedConfiguration(
                servers: "\(live.host):\(live.port),127.0.0.1:1", retryTimeout: .seconds(2))
            let connection = try MemcachedConnection(configuration: configuration, logger: LiveMemcachedTests.logger)
            defer { connection.close() }
            let prefix = LiveMemcachedTests.uniqueKey()
            let keys = (0..<20).map { "\(prefix):\($0)" }
            let onLive = try #require(keys.first { connection.server(forKey: $0) == live })
            #expect(keys.contains { connection.server(forKey: $0) != live }, "some keys live on the dead node")
            #expect(connection.set(onLive, value: [1, 2, 3]) == .stored)

            guard case .failure(let error) = connection.get(many: keys) else {
                Issue.record("a read that could not reach a node succeeded")
                return
            }
            #expect(error.node == MemcachedServer(host: "127.0.0.1", port: 1), "the failure names the dead node")
            guard case .hit(let item) = connection.get(onLive) else {
                Issue.record("the live node's answer was lost or out of step")
                return
            }
            #expect(item.value == [1, 2, 3])
        }
    }
}
