import MemcachedClient

/// A worker's ``CacheClient`` behind the process's ``NodeCircuitBreaker`` (docs/design.md §5).
///
/// Every operation, flush and readiness check asks the breaker about the key's node first:
/// skipped nodes fail at once with ``skipped``; the one probe renews this worker's connection
/// before it runs, so a node still in libmemcached's own retry timeout in this handle is really
/// tried. When the breaker's ``NodeCircuitBreaker/recoveryCount`` moved since this worker last
/// looked, the connection is renewed before the next operation: every worker then uses a node
/// again as soon as one probe found it back.
///
/// Within one request (``beginRequest()``), a node that failed once is not tried again, so a
/// hung node costs a read at most one poll timeout. A `delete` is the exception: it is the
/// repair that keeps an entry the request could not update from being served stale (a failed
/// write-through, a lease whose read failed), and a timeout under load is often transient, so it
/// is tried unless the breaker is open — a write may cost two. A caller that never begins
/// requests (a background refresher) tries a failed node again after ``requestMemory``.
///
/// One value per worker thread, like the connection it wraps.
final class CircuitBreakingCacheClient: CacheClient {
    private let base: any CacheClient
    let breaker: NodeCircuitBreaker
    private var seenRecoveries: Int
    /// Nodes that failed during the current request, and when the first did.
    private var failedThisRequest: [MemcachedServer] = []
    private var firstFailure = ContinuousClock.now
    static let requestMemory: Duration = .seconds(1)

    static let skipped = MemcachedError(
        code: .serverMarkedDead, message: "skipped: the node failed repeatedly (circuit open)", returnCode: -1)

    init(_ base: any CacheClient, breaker: NodeCircuitBreaker) {
        self.base = base
        self.breaker = breaker
        self.seenRecoveries = breaker.recoveryCount
    }

    /// Starts a new request: nodes that failed during the previous one may be tried again.
    func beginRequest() {
        if !failedThisRequest.isEmpty { failedThisRequest.removeAll(keepingCapacity: true) }
    }

    /// Renews the connection when a probe found a node back since this worker last looked.
    /// - Returns: the breaker's recovery count as seen now.
    @discardableResult
    private func catchUpWithRecoveries() -> Int {
        let recoveries = breaker.recoveryCount
        if recoveries != seenRecoveries {
            base.reconnect()
            seenRecoveries = recoveries
        }
        return recoveries
    }

    /// Runs `operation` on the node `server` names unless the breaker skips it; books its outcome.
    ///
    /// `server` is evaluated only when something is wrong (a troubled node, a failure in this
    /// request, a failed operation): naming a key's node hashes the key and allocates its host
    /// name, which the healthy path does not pay.
    private func guarded<Result>(
        _ server: () -> MemcachedServer?, _ operation: () -> Result, error: (Result) -> MemcachedError?,
        skipped: Result, isRepair: Bool = false
    ) -> Result {
        let recoveries = catchUpWithRecoveries()
        var node: MemcachedServer?
        var admission = NodeCircuitBreaker.Admission.proceed
        if breaker.hasTroubledNodes || !failedThisRequest.isEmpty {
            node = server()
            guard let node else { return operation() }  // an invalid key: no node, no I/O
            if !failedThisRequest.isEmpty {
                if ContinuousClock.now - firstFailure > Self.requestMemory {
                    failedThisRequest.removeAll(keepingCapacity: true)
                } else if !isRepair, failedThisRequest.contains(node) {
                    breaker.record(.skipped)
                    return skipped
                }
            }
            admission = breaker.admit(node)
            switch admission {
            case .skip: return skipped
            case .probe: base.reconnect()
            case .proceed: break
            }
        }
        let result = operation()
        if let failure = error(result), failure.code != .invalidKey {
            guard let failed = node ?? server() else { return result }
            if failedThisRequest.isEmpty { firstFailure = .now }
            failedThisRequest.append(failed)
            breaker.recordFailure(failed, probe: admission == .probe)
        } else if let node, let recovered = breaker.recordSuccess(node, probe: admission == .probe),
            recovered == recoveries + 1
        {
            seenRecoveries = recovered  // renewed just before the probe: nothing to catch up on
        }
        return result
    }

    func get(_ key: String) -> MemcachedGetResult {
        guarded({ base.server(forKey: key) }, { base.get(key) }, error: { if case .failure(let e) = $0 { e } else { nil } },
            skipped: .failure(Self.skipped))
    }

    /// A multi-get for healthy nodes only: while any node is troubled, or one failed in this
    /// request, it fails at once without I/O (callers then read key by key, each guarded). A
    /// failure is booked against the node the connection names, like any other operation's.
    func get(many keys: [String]) -> Result<[String: MemcachedItem], MemcachedError> {
        guardedMany { base.get(many: keys) }
    }

    /// An operation on many keys, so maybe every node: only while no node is troubled (a read of
    /// one then goes through the breaker key by key); a failure is booked against the node named.
    private func guardedMany(
        _ operation: () -> Result<[String: MemcachedItem], MemcachedError>
    ) -> Result<[String: MemcachedItem], MemcachedError> {
        guard !breaker.hasTroubledNodes, failedThisRequest.isEmpty else { return .failure(Self.skipped) }
        catchUpWithRecoveries()
        let result = operation()
        if case .failure(let error) = result, let failed = error.node, error.code != .invalidKey {
            if failedThisRequest.isEmpty { firstFailure = .now }
            failedThisRequest.append(failed)
            breaker.recordFailure(failed)
        }
        return result
    }

    func addAndGet(many stores: [MemcachedStore], flags: UInt32) -> Result<[String: MemcachedItem], MemcachedError> {
        guardedMany { base.addAndGet(many: stores, flags: flags) }
    }

    func casAndGet(many stores: [MemcachedStore], flags: UInt32) -> Result<[String: MemcachedItem], MemcachedError> {
        guardedMany { base.casAndGet(many: stores, flags: flags) }
    }

    /// The adds and the read go out before `body` runs and are read after it; while the breaker
    /// skips multi-key operations, `body` runs alone.
    func addAndGet<Value, Failure: Error>(
        many stores: [MemcachedStore], flags: UInt32, around body: () throws(Failure) -> Value
    ) throws(Failure) -> (value: Value, found: Result<[String: MemcachedItem], MemcachedError>) {
        var outcome: Result<Value, Failure>?
        let found = guardedMany {
            let sent = base.addAndGet(many: stores, flags: flags, around: { Result(catching: body) })
            outcome = sent.value
            return sent.found
        }
        return (try (outcome ?? Result(catching: body)).get(), found)
    }

    func add(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        guarded(
            { base.server(forKey: key) }, { base.add(key, value: value, flags: flags, expiration: expiration) },
            error: { if case .failure(let e) = $0 { e } else { nil } }, skipped: .failure(Self.skipped))
    }

    func addAndGet(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedGetResult {
        guarded(
            { base.server(forKey: key) }, { base.addAndGet(key, value: value, flags: flags, expiration: expiration) },
            error: { if case .failure(let e) = $0 { e } else { nil } }, skipped: .failure(Self.skipped))
    }

    /// The add and the read go out before `body` runs and are read after it (see ``CacheClient``);
    /// when the breaker skips the node, `body` runs alone.
    func addAndGet<Value, Failure: Error>(
        _ key: String, value: [UInt8], flags: UInt32, expiration: Int, around body: () throws(Failure) -> Value
    ) throws(Failure) -> (value: Value, found: MemcachedGetResult) {
        var outcome: Result<Value, Failure>?
        let found = guarded(
            { base.server(forKey: key) },
            { () -> MemcachedGetResult in
                let sent = base.addAndGet(
                    key, value: value, flags: flags, expiration: expiration, around: { Result(catching: body) })
                outcome = sent.value
                return sent.found
            },
            error: { if case .failure(let e) = $0 { e } else { nil } }, skipped: .failure(Self.skipped))
        return (try (outcome ?? Result(catching: body)).get(), found)
    }

    func cas(_ key: String, value: [UInt8], cas: UInt64, flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        guarded(
            { base.server(forKey: key) }, { base.cas(key, value: value, cas: cas, flags: flags, expiration: expiration) },
            error: { if case .failure(let e) = $0 { e } else { nil } }, skipped: .failure(Self.skipped))
    }

    func delete(_ key: String) -> MemcachedDeleteResult {
        guarded(
            { base.server(forKey: key) }, { base.delete(key) }, error: { if case .failure(let e) = $0 { e } else { nil } },
            skipped: .failure(Self.skipped), isRepair: true)
    }

    func server(forKey key: String) -> MemcachedServer? { base.server(forKey: key) }

    var servers: [MemcachedServer] { base.servers }

    func flush(server: MemcachedServer) -> MemcachedError? {
        guarded({ server }, { base.flush(server: server) }, error: { $0 }, skipped: Self.skipped)
    }

    func ping(server: MemcachedServer) -> MemcachedError? {
        guarded({ server }, { base.ping(server: server) }, error: { $0 }, skipped: Self.skipped)
    }

    func reconnect() { base.reconnect() }
}
