import Dispatch
import Foundation
import MemcachedClient
import Synchronization
import Testing
import ProfileServiceTesting
import TestSupport

@testable import ProfileService

/// The two holes of coalesced reads (docs/design.md §2.1), replayed through the cache hooks:
/// both answered an acknowledged-older version before the fix.
@Suite(.serialized) struct CoalescedReadTests {
    /// What a reader thread answered.
    private final class ReadResult: Sendable {
        private let value = Mutex<ProfileRepository.Representation?>(nil)
        var version: Int32? { value.withLock { $0?.version } }
        func set(_ read: ProfileRepository.Representation?) { value.withLock { $0 = read } }
    }

    /// Reads `id` on a thread of its own with fresh connections.
    private func reader(
        _ id: Int64, minVersion: Int32? = nil, shared: ProfileCacheShared, into result: ReadResult,
        finished: DispatchSemaphore? = nil
    ) -> TestThread {
        TestThread {
            let backends = try! InMemoryBackends()
            let read = try? backends.repository(shared).read(id: id, minVersion: minVersion)
            result.set(read)
            withExtendedLifetime(backends) {}
            finished?.signal()
        }
    }

    @Test func aFollowerGetsNoRowOlderThanItsMinVersion() throws {
        let gate = ReaderGate()
        let followed = DispatchSemaphore(value: 0)
        let shared = ProfileCacheShared(
            hooks: .init(afterDatabaseRead: gate.pause, willFollow: { _ in followed.signal() }))
        let backends = try InMemoryBackends()
        let profile = try backends.seed()

        gate.arm(profile.id)
        let leadersResult = ReadResult()
        let leader = reader(profile.id, shared: shared, into: leadersResult)
        gate.waitUntilPaused()  // the leader holds version 1 from PostgreSQL and its lease is in memcached
        // Version 2 committed where this cache sees no write-through (SQL, or another instance).
        guard case .updated(let two) = try backends.store.updateDisplayName(id: profile.id, to: "Two", expectedVersion: 1)
        else {
            Issue.record("update failed")
            return
        }

        let followersResult = ReadResult()
        let follower = reader(profile.id, minVersion: two.version, shared: shared, into: followersResult)
        followed.wait()  // the follower found the lease and waits for the leader's row
        gate.release()
        leader.join()
        follower.join()

        #expect(leadersResult.version == 1, "the leader began before the write")
        #expect(followersResult.version == 2, "min_version=2 must never answer version 1")
    }

    @Test func aReaderArrivingAfterThePopulateDoesNotGetAnOlderVersionThanAnAcknowledgedWrite() throws {
        let gate = ReaderGate()
        let followed = DispatchSemaphore(value: 0)
        let shared = ProfileCacheShared(hooks: .init(afterPopulate: gate.pause, willFollow: { _ in followed.signal() }))
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let writer = backends.repository(shared)

        gate.arm(profile.id)
        let leadersResult = ReadResult()
        let leader = reader(profile.id, shared: shared, into: leadersResult)
        gate.waitUntilPaused()  // version 1 landed; the leader has not finished its flight yet
        #expect(backends.cachedVersion(profile.id, shared: shared) == 1)
        guard case .updated(let two) = try writer.updateDisplayName(id: profile.id, to: "Two", expectedVersion: 1) else {
            Issue.record("update failed")
            return
        }
        #expect(backends.cachedVersion(profile.id, shared: shared) == 2)
        _ = backends.cache.delete(shared.configuration.key(for: profile.id))  // evicted

        // A reader that starts now, after version 2 was acknowledged.
        let finished = DispatchSemaphore(value: 0)
        let lateResult = ReadResult()
        let late = reader(profile.id, shared: shared, into: lateResult, finished: finished)
        // It either finishes on its own or waits for the paused leader; in that case let the leader go.
        var released = false
        while finished.wait(timeout: .now() + .milliseconds(5)) == .timedOut {
            if followed.wait(timeout: .now()) == .success {
                gate.release()
                released = true
            }
        }
        if !released { gate.release() }
        late.join()
        leader.join()

        #expect(lateResult.version == two.version, "a read that began after the ack must see it")
    }
}
