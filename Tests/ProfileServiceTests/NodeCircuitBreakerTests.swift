import MemcachedClient
import Synchronization
import Testing

@testable import ProfileService

/// The shared breaker's states on a manual clock, and workers' clients behind it over a fake
/// node whose per-handle failure state lasts until the handle is renewed (as libmemcached's does).
@Suite struct NodeCircuitBreakerTests {
    private let node = MemcachedServer(host: "127.0.0.1", port: 1)
    private let clock = ManualClock()

    private func breaker(threshold: Int = 3, open: Duration = .milliseconds(500)) -> NodeCircuitBreaker {
        let clock = self.clock
        return NodeCircuitBreaker(failureThreshold: threshold, openDuration: open, now: { clock.now })
    }

    @Test func opensAfterConsecutiveFailuresAndLetsOneProbeThroughAtATime() {
        let breaker = breaker()
        #expect(breaker.admit(node) == .proceed)
        #expect(!breaker.recordFailure(node))
        #expect(breaker.recordSuccess(node) == nil)  // a success resets the count
        #expect(!breaker.recordFailure(node))
        #expect(!breaker.recordFailure(node))
        #expect(breaker.recordFailure(node), "the third failure in a row opens it")
        #expect(breaker.state(of: node) == .open)
        #expect(breaker.admit(node) == .skip)

        clock.advance(.milliseconds(499))
        #expect(breaker.admit(node) == .skip)
        clock.advance(.milliseconds(1))
        let admissions = (0..<16).map { _ in breaker.admit(node) }
        #expect(admissions.filter { $0 == .probe }.count == 1, "one probe, not every worker at once")
        #expect(admissions.filter { $0 == .skip }.count == 15)
        #expect(breaker.state(of: node) == .probing)

        // The probe failed: open for another period.
        #expect(!breaker.recordFailure(node, probe: true))
        #expect(breaker.admit(node) == .skip)
        clock.advance(.milliseconds(500))
        #expect(breaker.admit(node) == .probe)
        #expect(breaker.recordSuccess(node, probe: true) == 1)
        #expect(breaker.recoveryCount == 1)
        #expect(breaker.state(of: node) == .closed)
        #expect(breaker.admit(node) == .proceed)
    }

    @Test func operationsAdmittedBeforeItOpenedDecideNothing() {
        let breaker = breaker(threshold: 1)
        #expect(breaker.recordFailure(node))
        #expect(!breaker.recordFailure(node), "a straggler's failure does not extend the open period")
        #expect(breaker.recordSuccess(node) == nil, "a straggler's success does not close it")
        #expect(breaker.state(of: node) == .open)
        clock.advance(.milliseconds(500))
        #expect(breaker.admit(node) == .probe)
        #expect(breaker.recordSuccess(node) == nil, "only the probe's outcome closes it")
        #expect(breaker.state(of: node) == .probing)
    }

    @Test func aLostProbeIsReplacedAfterTheProbeTimeout() {
        let clock = self.clock
        let breaker = NodeCircuitBreaker(
            failureThreshold: 1, openDuration: .milliseconds(100), probeTimeout: .seconds(1), now: { clock.now })
        breaker.recordFailure(node)
        clock.advance(.milliseconds(100))
        #expect(breaker.admit(node) == .probe)
        clock.advance(.milliseconds(999))
        #expect(breaker.admit(node) == .skip)
        clock.advance(.milliseconds(1))
        #expect(breaker.admit(node) == .probe)
    }

    @Test func everyWorkerUsesTheNodeAgainOnceOneProbeFoundItBack() {
        let breaker = breaker()
        let fakeNode = FakeNode()
        let workers = (0..<16).map { _ in CircuitBreakingCacheClient(FakeNodeClient(fakeNode, server: node), breaker: breaker) }
        for worker in workers { if case .miss = worker.get("k") {} else { Issue.record("healthy node failed") } }

        fakeNode.isUp.store(false, ordering: .relaxed)
        for worker in workers {
            worker.beginRequest()
            _ = worker.get("k")
        }
        #expect(breaker.state(of: node) == .open)
        #expect(fakeNode.calls.load(ordering: .relaxed) == 16 + 3, "skipped once open")

        // Back: every handle still holds the node in its own timeout until renewed.
        fakeNode.isUp.store(true, ordering: .relaxed)
        clock.advance(.milliseconds(500))
        let callsBefore = fakeNode.calls.load(ordering: .relaxed)
        var outcomes: [Bool] = []
        for worker in workers {
            worker.beginRequest()
            if case .miss = worker.get("k") { outcomes.append(true) } else { outcomes.append(false) }
        }
        #expect(outcomes.allSatisfy { $0 }, "the probe succeeded and every later worker renewed its handle")
        #expect(fakeNode.calls.load(ordering: .relaxed) - callsBefore == 16)
        #expect(breaker.recoveryCount == 1)
        #expect(fakeNode.renewals.load(ordering: .relaxed) == 16, "one renewal per worker: the probe's own")
    }

    @Test func aFailedNodeIsNotTriedTwiceInOneRequest() {
        let breaker = breaker(threshold: 10)
        let fakeNode = FakeNode()
        let worker = CircuitBreakingCacheClient(FakeNodeClient(fakeNode, server: node), breaker: breaker)
        fakeNode.isUp.store(false, ordering: .relaxed)
        worker.beginRequest()
        _ = worker.get("k")
        _ = worker.add("k", value: [1], flags: 0, expiration: 0)
        #expect(worker.flush(server: node) == CircuitBreakingCacheClient.skipped)
        #expect(fakeNode.calls.load(ordering: .relaxed) == 1, "a hung node costs a request one timeout")
        worker.reconnect()
        _ = worker.delete("k")
        #expect(fakeNode.calls.load(ordering: .relaxed) == 2, "a repair delete is tried all the same")
        fakeNode.isUp.store(true, ordering: .relaxed)
        worker.reconnect()
        worker.beginRequest()
        #expect(worker.get("k") == .miss, "the next request tries the node again")
        #expect(fakeNode.calls.load(ordering: .relaxed) == 3)
    }

    /// A write's look around its statement (``CacheClient/addAndGet(_:value:flags:expiration:around:)``):
    /// the statement runs exactly once whatever the node does, and the look's failure is booked.
    @Test func aLookAroundAStatementRunsTheStatementOnceWhenTheNodeFailsOrIsSkipped() {
        let breaker = breaker(threshold: 1)
        let fakeNode = FakeNode()
        let worker = CircuitBreakingCacheClient(FakeNodeClient(fakeNode, server: node), breaker: breaker)
        var statements = 0
        let healthy = worker.addAndGet("k", value: [1], flags: 0, expiration: 0) { () -> Int in
            statements += 1
            return 7
        }
        #expect(healthy.value == 7 && statements == 1)
        #expect(healthy.found == .miss)

        fakeNode.isUp.store(false, ordering: .relaxed)
        worker.beginRequest()
        let failed = worker.addAndGet("k", value: [1], flags: 0, expiration: 0) { () -> Int in
            statements += 1
            return 8
        }
        #expect(failed.value == 8 && statements == 2)
        if case .failure = failed.found {} else { Issue.record("a failed node's look must fail, not miss") }
        #expect(breaker.state(of: node) == .open, "the look's failure is booked against the node")

        worker.beginRequest()
        let callsBefore = fakeNode.calls.load(ordering: .relaxed)
        let skipped = worker.addAndGet("k", value: [1], flags: 0, expiration: 0) { () -> Int in
            statements += 1
            return 9
        }
        #expect(skipped.value == 9 && statements == 3, "the statement runs while the node is skipped")
        #expect(skipped.found == .failure(CircuitBreakingCacheClient.skipped))
        #expect(fakeNode.calls.load(ordering: .relaxed) == callsBefore, "no I/O to a skipped node")
    }
}

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let instant = Mutex(ContinuousClock.now)
    var now: ContinuousClock.Instant { instant.withLock { $0 } }
    func advance(_ duration: Duration) { instant.withLock { $0 += duration } }
}

/// One memcached node, up or down, shared by fake handles.
final class FakeNode: Sendable {
    let isUp = Atomic<Bool>(true)
    /// Operations that reached the node (or tried to connect to it).
    let calls = Atomic<Int>(0)
    let renewals = Atomic<Int>(0)
}

/// A handle over ``FakeNode`` that, like libmemcached, keeps failing after one failure until
/// it is renewed.
final class FakeNodeClient: CacheClient {
    private let node: FakeNode
    private let server: MemcachedServer
    private var inTimeout = false

    init(_ node: FakeNode, server: MemcachedServer) {
        self.node = node
        self.server = server
    }

    private func attempt() -> MemcachedError? {
        if inTimeout { return MemcachedError(code: .serverMarkedDead, message: "in timeout", returnCode: 0) }
        node.calls.add(1, ordering: .relaxed)
        guard node.isUp.load(ordering: .relaxed) else {
            inTimeout = true
            return MemcachedError(code: .timeout, message: "timeout", returnCode: 0)
        }
        return nil
    }

    func get(_ key: String) -> MemcachedGetResult { attempt().map { .failure($0) } ?? .miss }
    func add(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        attempt().map { .failure($0) } ?? .stored
    }
    func cas(_ key: String, value: [UInt8], cas: UInt64, flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        attempt().map { .failure($0) } ?? .stored
    }
    func delete(_ key: String) -> MemcachedDeleteResult { attempt().map { .failure($0) } ?? .notFound }
    func server(forKey key: String) -> MemcachedServer? { server }
    func flush(server: MemcachedServer) -> MemcachedError? { attempt() }
    var servers: [MemcachedServer] { [server] }
    func ping(server: MemcachedServer) -> MemcachedError? { attempt() }
    func reconnect() {
        inTimeout = false
        node.renewals.add(1, ordering: .relaxed)
    }
}
