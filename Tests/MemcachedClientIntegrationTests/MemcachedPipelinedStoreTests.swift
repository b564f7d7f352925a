import Foundation
import MemcachedClient
import Testing
import TestSupport

extension LiveMemcachedTests {
    /// `addAndGet(many:)` and `casAndGet(many:)`: stores sent with `noreply` on every node, then
    /// one multi-get whose values alone say which stores landed; the connection stays in step.
    @Suite struct MemcachedPipelinedStoreTests {
        @Test func addsLandOnlyWhereThereWasNoEntryAndAreReadBack() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let prefix = LiveMemcachedTests.uniqueKey()
            let taken = (0..<10).map { "\(prefix):taken:\($0)" }
            let free = (0..<30).map { "\(prefix):free:\($0)" }
            for key in taken { #expect(connection.set(key, value: Array("old".utf8)) == .stored) }
            #expect(Set((taken + free).compactMap { connection.server(forKey: $0) }).count == 2, "keys on both nodes")

            let stores = (taken + free).map { MemcachedStore(key: $0, value: Array("lease \($0)".utf8), expiration: 30) }
            let items = try connection.addAndGet(many: stores).get()
            for key in taken { #expect(items[key]?.value == Array("old".utf8), "an add over an entry is refused") }
            for key in free { #expect(items[key]?.value == Array("lease \(key)".utf8), "an add where none was lands") }
            // In step: a single get afterwards answers its own key.
            guard case .hit(let item) = connection.get(free[3]) else {
                Issue.record("the next get was not answered")
                return
            }
            #expect(item == items[free[3]])
        }

        /// `addAndGet(many:around:)`: every add and the multi-get are on the wire, on both nodes,
        /// while the body runs; the answers are read after it, the free keys holding the adds and
        /// the taken ones their entries; a body that throws leaves the connection in step.
        @Test func manyAddsAndGetsAroundABodyAreSentBeforeItAndReadAfterIt() throws {
            let connection = try LiveMemcachedTests.connection()
            let observer = try LiveMemcachedTests.connection()
            defer {
                connection.close()
                observer.close()
            }
            let prefix = LiveMemcachedTests.uniqueKey()
            let taken = (0..<6).map { "\(prefix):taken:\($0)" }
            let free = (0..<12).map { "\(prefix):free:\($0)" }
            for key in taken { #expect(connection.set(key, value: Array("old".utf8)) == .stored) }
            #expect(Set(free.compactMap { connection.server(forKey: $0) }).count == 2, "keys on both nodes")
            let stores = (taken + free).map { MemcachedStore(key: $0, value: Array("lease \($0)".utf8), expiration: 30) }

            var runs = 0
            let sent = connection.addAndGet(many: stores) { () -> Bool in
                runs += 1
                // Seen from elsewhere before the body returns: every add went out before it.
                let deadline = ContinuousClock.now + .seconds(2)
                while ContinuousClock.now < deadline {
                    if case .success(let items) = observer.get(many: free), items.count == free.count { return true }
                }
                return false
            }
            #expect(runs == 1)
            #expect(sent.value, "the adds were not on the wire while the body ran")
            let items = try sent.found.get()
            for key in taken { #expect(items[key]?.value == Array("old".utf8), "an add over an entry is refused") }
            for key in free { #expect(items[key]?.value == Array("lease \(key)".utf8), "an add where none was lands") }

            struct Thrown: Error {}
            #expect(throws: Thrown.self) {
                _ = try connection.addAndGet(many: [MemcachedStore(key: prefix + ":thrown", value: [1], expiration: 30)]) {
                    () throws(Thrown) -> Int in throw Thrown()
                }
            }
            #expect(connection.set(prefix + ":after", value: [2]) == .stored, "the connection is in step")
            guard case .hit(let after) = connection.get(prefix + ":after") else {
                Issue.record("the next get was not answered")
                return
            }
            #expect(after.value == [2])
        }

        /// `addAndGet(_:value:around:)`: the add and the `gets` are on the wire while the body
        /// runs (another connection sees the add land from inside it), the answer is read after,
        /// and a body that throws leaves the connection in step.
        @Test func anAddAndGetAroundABodyIsSentBeforeItAndReadAfterIt() throws {
            let connection = try LiveMemcachedTests.connection()
            let observer = try LiveMemcachedTests.connection()
            defer {
                connection.close()
                observer.close()
            }
            let free = LiveMemcachedTests.uniqueKey()
            let taken = LiveMemcachedTests.uniqueKey()
            #expect(connection.set(taken, value: Array("old".utf8)) == .stored)

            let sent = connection.addAndGet(free, value: Array("lease".utf8), expiration: 30) { () -> Bool in
                // Seen from elsewhere before the body returns: the add went out before it.
                let deadline = ContinuousClock.now + .seconds(2)
                while ContinuousClock.now < deadline {
                    if case .hit(let item) = observer.get(free), item.value == Array("lease".utf8) { return true }
                }
                return false
            }
            #expect(sent.value, "the add was not on the wire while the body ran")
            guard case .hit(let lease) = sent.found else {
                Issue.record("the key was not read back: \(sent.found)")
                return
            }
            #expect(lease.value == Array("lease".utf8))

            let refused = connection.addAndGet(taken, value: Array("lease".utf8)) { 7 }
            #expect(refused.value == 7)
            guard case .hit(let old) = refused.found else {
                Issue.record("the taken key was not read back: \(refused.found)")
                return
            }
            #expect(old.value == Array("old".utf8), "an add over an entry is refused")

            struct Thrown: Error {}
            #expect(throws: Thrown.self) {
                _ = try connection.addAndGet(LiveMemcachedTests.uniqueKey(), value: [1]) { () throws(Thrown) -> Int in
                    throw Thrown()
                }
            }
            #expect(connection.set(free + ":after", value: [2]) == .stored, "the connection is in step")
            guard case .hit(let after) = connection.get(free + ":after") else {
                Issue.record("the next get was not answered")
                return
            }
            #expect(after.value == [2])
        }

        @Test func casesLandOnlyOverTheirCASAndTheReadBackTellsWhich() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let prefix = LiveMemcachedTests.uniqueKey()
            let keys = (0..<20).map { "\(prefix):\($0)" }
            for key in keys { #expect(connection.set(key, value: Array("lease".utf8)) == .stored) }
            let leases = try connection.get(many: keys).get()
            // Every other key changed since its CAS was read: its cas must lose.
            let changed = Set(keys.enumerated().filter { $0.offset % 2 == 1 }.map(\.element))
            for key in changed { #expect(connection.set(key, value: Array("writer".utf8)) == .stored) }

            let stores = keys.map { key in
                MemcachedStore(key: key, value: Array("row \(key)".utf8), expiration: 30, cas: leases[key]!.cas)
            }
            let items = try connection.casAndGet(many: stores).get()
            for key in keys {
                let expected = changed.contains(key) ? Array("writer".utf8) : Array("row \(key)".utf8)
                #expect(items[key]?.value == expected)
            }
            #expect(connection.set(prefix + ":after", value: [1]) == .stored, "the connection is in step")
            #expect(connection.get(prefix + ":after") != .miss)
        }

        @Test func aCasOnAKeyThatIsGoneDoesNotRecreateIt() throws {
            let connection = try LiveMemcachedTests.connection()
            defer { connection.close() }
            let key = LiveMemcachedTests.uniqueKey()
            #expect(connection.set(key, value: [1]) == .stored)
            guard case .hit(let lease) = connection.get(key) else {
                Issue.record("no entry")
                return
            }
            #expect(connection.delete(key) == .deleted)
            let items = try connection.casAndGet(many: [
                MemcachedStore(key: key, value: [2], expiration: 30, cas: lease.cas),
                MemcachedStore(key: key + ":other", value: [3], expiration: 30, cas: 1),
            ]).get()
            #expect(items.isEmpty, "neither cas created an entry")
        }
    }
}
