import Foundation
import MemcachedClient
import Testing
import TestSupport

extension LiveMemcachedTests {
    @Suite struct MemcachedConnectionTests {
        @Test func setThenGetReturnsValueFlagsAndCAS() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let key = LiveMemcachedTests.uniqueKey()
            #expect(connection.set(key, value: Array("hello".utf8), flags: 42) == .stored)
            guard case .hit(let item) = connection.get(key) else {
                Issue.record("expected a hit")
                return
            }
            #expect(item.value == Array("hello".utf8))
            #expect(item.flags == 42)
            #expect(item.cas != 0)
            // A second set changes the CAS unique.
            #expect(connection.set(key, value: [1], flags: 0) == .stored)
            guard case .hit(let second) = connection.get(key) else {
                Issue.record("expected a hit")
                return
            }
            #expect(second == MemcachedItem(value: [1], flags: 0, cas: second.cas))
            #expect(second.cas != item.cas)
        }

        @Test func getOfAMissingKeyIsAMiss() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            #expect(connection.get(LiveMemcachedTests.uniqueKey()) == .miss)
            // Still usable afterwards (the fetch loop drained the response).
            let key = LiveMemcachedTests.uniqueKey()
            #expect(connection.set(key, value: [7]) == .stored)
            #expect(connection.get(key) == .hit(MemcachedItem(value: [7], flags: 0, cas: casOf(connection, key))))
        }

        @Test func addStoresOnlyANewKey() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let key = LiveMemcachedTests.uniqueKey()
            #expect(connection.add(key, value: [1], flags: 3) == .stored)
            #expect(connection.add(key, value: [2]) == .notStored)
            guard case .hit(let item) = connection.get(key) else {
                Issue.record("expected a hit")
                return
            }
            #expect(item.value == [1])
            #expect(item.flags == 3)
        }

        @Test func addAndGetReadsTheEntryAsTheAddLeftIt() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let key = LiveMemcachedTests.uniqueKey()
            guard case .hit(let added) = connection.addAndGet(key, value: [1], flags: 5, expiration: 60) else {
                Issue.record("a free key: the add stores and the get reads it back")
                return
            }
            #expect(added.value == [1])
            #expect(added.flags == 5)
            #expect(added.cas == casOf(connection, key), "the CAS value of the stored entry")
            guard case .hit(let existing) = connection.addAndGet(key, value: [2]) else {
                Issue.record("a taken key: the get reads what was there")
                return
            }
            #expect(existing.value == [1], "the add changed nothing")
            // The connection is in step afterwards: every later answer belongs to its request.
            for index in 0..<20 {
                let other = LiveMemcachedTests.uniqueKey()
                #expect(connection.set(other, value: [UInt8(index)]) == .stored)
                #expect(connection.addAndGet(other, value: [99]) == .hit(MemcachedItem(value: [UInt8(index)], flags: 0, cas: casOf(connection, other))))
                #expect(connection.get(LiveMemcachedTests.uniqueKey()) == .miss)
            }
        }

        @Test func casSucceedsThenConflictsThenFindsNothing() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let key = LiveMemcachedTests.uniqueKey()
            #expect(connection.set(key, value: [1]) == .stored)
            let first = casOf(connection, key)
            #expect(connection.cas(key, value: [2], cas: first, flags: 9) == .stored)
            // The CAS read before the write is stale now.
            #expect(connection.cas(key, value: [3], cas: first) == .exists)
            guard case .hit(let item) = connection.get(key) else {
                Issue.record("expected a hit")
                return
            }
            #expect(item.value == [2])
            #expect(item.flags == 9)
            #expect(connection.delete(key) == .deleted)
            #expect(connection.cas(key, value: [4], cas: item.cas) == .notFound)
        }

        @Test func deleteReportsDeletedThenNotFound() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let key = LiveMemcachedTests.uniqueKey()
            #expect(connection.set(key, value: [1]) == .stored)
            #expect(connection.delete(key) == .deleted)
            #expect(connection.delete(key) == .notFound)
            #expect(connection.get(key) == .miss)
        }

        @Test func binaryValuesRoundTrip() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let values: [[UInt8]] = [
                [], [0], [0, 0, 0], Array(0...255), [13, 10, 46, 13, 10],  // "\r\n.\r\n"
                Array("END\r\nVALUE x 0 1\r\n".utf8), (0..<500_000).map { UInt8(truncatingIfNeeded: $0 &* 31) },
            ]
            for value in values {
                let key = LiveMemcachedTests.uniqueKey()
                #expect(connection.set(key, value: value, flags: UInt32.max) == .stored)
                guard case .hit(let item) = connection.get(key) else {
                    Issue.record("expected a hit for a value of \(value.count) bytes")
                    continue
                }
                #expect(item.value == value)
                #expect(item.flags == UInt32.max)
            }
        }

        @Test func expirationIsHonoured() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let key = LiveMemcachedTests.uniqueKey()
            let added = LiveMemcachedTests.uniqueKey()
            #expect(connection.set(key, value: [1], expiration: 1) == .stored)
            #expect(connection.add(added, value: [1], expiration: 1) == .stored)
            if case .hit = connection.get(key) {} else { Issue.record("expected a hit before expiry") }
            // memcached's clock ticks in whole seconds: the items expire within two of now.
            #expect(Eventually.wait(timeout: .seconds(3)) {
                connection.get(key) == .miss && connection.get(added) == .miss
            }, "the items did not expire")
            #expect(connection.add(added, value: [2]) == .stored)
        }

        @Test func invalidKeysFailWithoutTheNetwork() throws {
            // Nothing listens on port 1: a key that reached the network would fail differently.
            let connection = try MemcachedConnection(
                configuration: MemcachedConfiguration(servers: "127.0.0.1:1"), logger: LiveMemcachedTests.logger)
            defer { connection.close() }
            for key in ["", " ", "a b", "tab\tkey", "line\n", "cr\r", "nul\u{0}", "del\u{7F}", String(repeating: "k", count: 251)] {
                guard case .failure(let error) = connection.get(key) else {
                    Issue.record("get accepted \(key.debugDescription)")
                    continue
                }
                #expect(error.code == .invalidKey)
                if case .failure(let error) = connection.set(key, value: [1]) {
                    #expect(error.code == .invalidKey)
                } else {
                    Issue.record("set accepted \(key.debugDescription)")
                }
                if case .failure(let error) = connection.add(key, value: [1]) {
                    #expect(error.code == .invalidKey)
                } else {
                    Issue.record("add accepted \(key.debugDescription)")
                }
                if case .failure(let error) = connection.cas(key, value: [1], cas: 1) {
                    #expect(error.code == .invalidKey)
                } else {
                    Issue.record("cas accepted \(key.debugDescription)")
                }
                if case .failure(let error) = connection.delete(key) {
                    #expect(error.code == .invalidKey)
                } else {
                    Issue.record("delete accepted \(key.debugDescription)")
                }
                #expect(connection.server(forKey: key) == nil)
            }
            // A valid key does reach the (absent) network.
            guard case .failure(let error) = connection.get("valid") else {
                Issue.record("expected a failure from port 1")
                return
            }
            #expect(error.code == .connectionFailure || error.code == .serverMarkedDead)
            #expect(!error.message.isEmpty)
        }

        @Test func longestAndNonASCIIKeysWork() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let longest = String(repeating: "k", count: 234) + String(UInt64.random(in: 1_000_000_000_000_000...9_999_999_999_999_999))
            #expect(longest.utf8.count == 250)
            let unicode = "profil:é:\(UInt64.random(in: 0...UInt64.max))"
            for key in [longest, unicode] {
                #expect(connection.set(key, value: [5]) == .stored)
                if case .hit(let item) = connection.get(key) { #expect(item.value == [5]) } else {
                    Issue.record("expected a hit")
                }
            }
        }
    }
}

/// The current CAS unique of `key`, or 0.
func casOf(_ connection: MemcachedConnection, _ key: String) -> UInt64 {
    if case .hit(let item) = connection.get(key) { return item.cas }
    return 0
}
