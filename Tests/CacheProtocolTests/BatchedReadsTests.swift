import Foundation
import ProfileServiceTesting
import Synchronization
import Testing
import TestSupport

@testable import ProfileService

/// Concurrent misses read with one query (docs/design.md §2.8): a read goes alone while a lane is
/// free; reads that arrive while every lane is busy are read together by the first of them, and
/// each gets its own row (or the batch's failure).
@Suite struct BatchedReadsTests {
    typealias Backends = InMemoryBackends

    /// A store whose single reads of `heldID` wait for the gate, and which records its batches.
    final class GatedStore: ProfileStore, @unchecked Sendable {
        let base: any ProfileStore
        let heldID: Int64
        let gate: ReaderGate
        let batches = Mutex<[[Int64]]>([])
        let failBatches = Atomic<Bool>(false)

        init(base: any ProfileStore, heldID: Int64, gate: ReaderGate) {
            self.base = base
            self.heldID = heldID
            self.gate = gate
        }

        func profile(id: Int64) throws(ProfileStoreError) -> Profile? {
            gate.pause(id)
            return try base.profile(id: id)
        }
        func profiles(ids: [Int64]) throws(ProfileStoreError) -> [Int64: Profile] {
            batches.withLock { $0.append(ids) }
            if failBatches.load(ordering: .relaxed) { throw .unavailable }
            return try base.profiles(ids: ids)
        }
        func deletedVersion(id: Int64) throws(ProfileStoreError) -> Int32? { try base.deletedVersion(id: id) }
        func updateDisplayName(id: Int64, to displayName: String, expectedVersion: Int32) throws(ProfileStoreError)
            -> ProfileUpdateOutcome
        { try base.updateDisplayName(id: id, to: displayName, expectedVersion: expectedVersion) }
        func create(id: Int64, username: String, displayName: String) throws(ProfileStoreError) -> Profile {
            try base.create(id: id, username: username, displayName: displayName)
        }
        func isHealthy() -> Bool { base.isHealthy() }
    }

    final class Answers: Sendable {
        let byID = Mutex<[Int64: Result<Int64?, ProfileStoreError>]>([:])
        var all: [Int64: Result<Int64?, ProfileStoreError>] { byID.withLock { $0 } }
    }

    /// Holds lane 1 with a read of `held`, then starts readers of `ids` and returns their threads
    /// and where each one's answer lands.
    private func queueBehindAHeldRead(
        batched: BatchedReads, store: GatedStore, gate: ReaderGate, ids: [Int64]
    ) -> (held: TestThread, readers: [TestThread], answers: Answers) {
        let answers = Answers()
        gate.arm(store.heldID)
        let held = TestThread { _ = try? batched.row(id: store.heldID, store: store) }
        gate.waitUntilPaused()
        let readers = ids.map { id in
            TestThread {
                let answer = Result { () throws(ProfileStoreError) in try batched.row(id: id, store: store)?.id }
                answers.byID.withLock { $0[id] = answer }
            }
        }
        return (held, readers, answers)
    }

    @Test func readsThatArriveWhileTheLaneIsBusyAreReadTogetherAndEachGetsItsRow() throws {
        let backends = try Backends()
        let held = try backends.seed()
        let present = try (0..<4).map { _ in try backends.seed() }.map(\.id)
        let absent = Int64.random(in: 1_000_000_000...2_000_000_000)
        let gate = ReaderGate()
        let store = GatedStore(base: backends.store, heldID: held.id, gate: gate)
        let batched = BatchedReads(lanes: 1)

        let (holder, readers, answers) = queueBehindAHeldRead(
            batched: batched, store: store, gate: gate, ids: present + [absent])
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(2)) { batched.queuedCount == 5 })
        gate.release()
        holder.join()
        readers.forEach { $0.join() }

        #expect(store.batches.withLock { $0 }.map { Set($0) } == [Set(present + [absent])], "one query for the five")
        let got = answers.all
        for id in present { #expect((try? got[id]?.get()) == .some(id), "\(id) gets its own row") }
        #expect((try? got[absent]?.get()) == .some(nil), "an id with no row gets none")
        #expect(batched.batches.load(ordering: .relaxed) == 1)
        #expect(batched.batchedIDs.load(ordering: .relaxed) == 5)
        #expect(batched.queuedCount == 0 && batched.readingCount == 0, "every lane free again")
    }

    @Test func aFailedBatchFailsEachOfItsReads() throws {
        let backends = try Backends()
        let held = try backends.seed()
        let ids = try (0..<3).map { _ in try backends.seed() }.map(\.id)
        let gate = ReaderGate()
        let store = GatedStore(base: backends.store, heldID: held.id, gate: gate)
        store.failBatches.store(true, ordering: .relaxed)
        let batched = BatchedReads(lanes: 1)

        let (holder, readers, answers) = queueBehindAHeldRead(batched: batched, store: store, gate: gate, ids: ids)
        #expect(Eventually.wait(timeout: .seconds(5), interval: .milliseconds(2)) { batched.queuedCount == 3 })
        gate.release()
        holder.join()
        readers.forEach { $0.join() }
        let got = answers.all
        for id in ids {
            guard case .failure(.unavailable)? = got[id] else {
                Issue.record("\(id): \(String(describing: got[id]))")
                continue
            }
        }
        #expect(batched.queuedCount == 0 && batched.readingCount == 0)
    }

    @Test func aReadGoesAloneWhileALaneIsFree() throws {
        let backends = try Backends()
        let held = try backends.seed()
        let other = try backends.seed()
        let gate = ReaderGate()
        let store = GatedStore(base: backends.store, heldID: held.id, gate: gate)
        let batched = BatchedReads(lanes: 2)

        let (holder, readers, answers) = queueBehindAHeldRead(batched: batched, store: store, gate: gate, ids: [other.id])
        readers.forEach { $0.join() }  // finishes while lane 1 is still held: it took lane 2
        #expect((try? answers.all[other.id]?.get()) == .some(other.id))
        #expect(store.batches.withLock { $0 }.isEmpty, "no batch: it read alone")
        gate.release()
        holder.join()
    }
}
