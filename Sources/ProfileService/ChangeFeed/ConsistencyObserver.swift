import Dispatch
import Foundation
public import Logging
import MemcachedClient
import Metrics
import ServiceRuntime
import Synchronization

/// The service measures its own consistency (docs/design.md §3.8), as Meta's Polaris does: the
/// change feed hands it every batch it applied; a share of the changes is sampled and, after a
/// delay, memcached is checked for an entry older than the change; a suspect is confirmed against
/// PostgreSQL before it counts, and a confirmed violation is repaired. The outcomes go to
/// `profile_service_consistency_checks_total{result}` (``ConsistencyVerdict/Outcome``), from which an
/// operator reads "n nines within the delay".
///
/// Its own thread and connections (a ``ProfileWorker``); the feed's thread only appends to a
/// bounded queue and never waits on it.
public final class ConsistencyObserver: Sendable {
    /// The share of committed changes checked, 0…1.
    public let sampleRate: Double
    /// How long after the change was applied it is checked.
    public let delay: Duration
    /// Sampled changes waiting at most; beyond, a sample is dropped (and counted).
    public let capacity: Int
    private let logger: Logger
    private let queue = Mutex<[Sample]>([])
    private let wake = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let counts = Mutex<[ConsistencyVerdict.Outcome: Int]>([:])
    private let counters: [ConsistencyVerdict.Outcome: Counter]

    struct Sample: Sendable {
        var id: Int64
        /// 0 for a deletion.
        var version: Int32
        var due: ContinuousClock.Instant
        /// A cached profile of a row found gone, to be looked at once more: the entry seen (its
        /// CAS value) and its version.
        var secondLook: (cas: UInt64, cachedVersion: Int32)?
    }

    public init(sampleRate: Double, delay: Duration, capacity: Int = 10_000, logger: Logger) {
        self.sampleRate = min(max(sampleRate, 0), 1)
        self.delay = delay
        self.capacity = capacity
        self.logger = logger
        var counters: [ConsistencyVerdict.Outcome: Counter] = [:]
        for outcome in ConsistencyVerdict.Outcome.allCases {
            counters[outcome] = Counter(label: MetricFamily.consistencyChecks.name, dimensions: [("result", outcome.rawValue)])
        }
        self.counters = counters
    }

    /// Checks so far with this outcome (tests, and the figure in docs/design.md §3.8).
    public func count(_ outcome: ConsistencyVerdict.Outcome) -> Int {
        counts.withLock { $0[outcome, default: 0] }
    }

    /// Starts the checking thread; `makeWorker` builds its connections, on that thread.
    public func start(makeWorker: @escaping @Sendable () throws -> ProfileWorker) {
        guard sampleRate > 0, !started.exchange(true, ordering: .relaxed) else { return }
        let thread = Thread { [self] in
            defer { finished.signal() }
            do {
                let worker = try makeWorker()
                run(worker)
            } catch {
                logger.error("consistency observer cannot start", metadata: ["error": "\(error)"])
            }
        }
        thread.name = "consistency-observer"
        thread.start()
    }

    /// Stops the checking thread and waits for it. Idempotent: a second call returns at once.
    public func stop() {
        guard !stopping.exchange(true, ordering: .relaxed), started.load(ordering: .relaxed) else { return }
        wake.signal()
        finished.wait()
    }

    /// The changes the feed just applied (the last of each id). Called on the feed's thread.
    func observe(_ changes: [ProfileChange]) {
        guard sampleRate > 0, started.load(ordering: .relaxed) else { return }
        let due = ContinuousClock.now + delay
        var dropped = 0
        let wasEmpty = queue.withLock { queue -> Bool in
            let wasEmpty = queue.isEmpty
            for change in changes where sampleRate >= 1 || Double.random(in: 0..<1) < sampleRate {
                guard queue.count < capacity else {
                    dropped += 1
                    continue
                }
                switch change {
                case .changed(let id, let version, _): queue.append(Sample(id: id, version: version, due: due))
                case .deleted(let id): queue.append(Sample(id: id, version: 0, due: due))
                }
            }
            return wasEmpty
        }
        for _ in 0..<dropped { record(.dropped) }
        if wasEmpty { wake.signal() }
    }

    private func run(_ worker: ProfileWorker) {
        while !stopping.load(ordering: .relaxed) {
            let next = queue.withLock { $0.first?.due }
            guard let next else {
                _ = wake.wait(timeout: .after(.seconds(1)))
                continue
            }
            let wait = ContinuousClock.now.duration(to: next)
            if wait > .zero {
                _ = wake.wait(timeout: .after(wait))
                continue
            }
            let due = queue.withLock { queue -> [Sample] in
                let now = ContinuousClock.now
                let count = queue.prefix { $0.due <= now }.count
                defer { queue.removeFirst(count) }
                return Array(queue.prefix(count))
            }
            for sample in due where !stopping.load(ordering: .relaxed) { check(sample, worker) }
        }
    }

    /// Checks one sampled change. A suspect entry is confirmed against PostgreSQL, and a
    /// violation stands only if memcached still holds the very entry it saw (the same CAS value:
    /// memcached gives every store a new one) after the row was read: the entry was then there
    /// all along, the row's read included, so it was stale at that instant. An entry replaced
    /// between the two reads — a write committed and written through meanwhile, a profile created
    /// again after its deletion and then changed — proves nothing, and is checked again from the
    /// new entry, twice at most.
    ///
    /// A cached profile of a row found gone needs one more look, a delay later
    /// (``ConsistencyVerdict/confirmsAtOnce(_:)``): the deletion that made it stale may be one
    /// that committed an instant before the row was read, its writer's repair still on its way
    /// (the sample's own deletion may be long repaired, and the profile created again since).
    /// Only an entry that stays unchanged through that delay is a violation.
    private func check(_ sample: Sample, _ worker: ProfileWorker) {
        var lookup = worker.cacheLookup(id: sample.id)
        if let second = sample.secondLook {
            guard case .hit(let item) = lookup, item.cas == second.cas else {
                record(.consistent)  // repaired or replaced within the delay
                return
            }
            guard let row = storedRow(of: sample.id, worker) else { return }
            confirmViolation(sample, cachedVersion: second.cachedVersion, row: row, worker)
            return
        }
        for _ in 0..<3 {
            let cached: ConsistencyVerdict.Cached
            var seenCAS: UInt64 = 0
            switch lookup {
            case .failure: cached = .unreachable
            case .miss: cached = .nothing
            case .hit(let item):
                seenCAS = item.cas
                switch CacheEntry(decoding: item.value, shape: worker.repository.configuration.entryShape) {
                case .profile(let version, _, _)?: cached = .profile(version: version)
                case .absent?: cached = .absent
                case .lease?, .handle?, nil: cached = .nothing
                }
            }
            if let outcome = ConsistencyVerdict.judge(change: sample.version, cached: cached) {
                record(outcome)
                return
            }
            let cachedVersion: Int32
            switch cached {
            case .profile(let version): cachedVersion = version
            case .absent: cachedVersion = 0
            case .unreachable, .nothing: return
            }
            guard let row = storedRow(of: sample.id, worker) else { return }
            let outcome = ConsistencyVerdict.confirm(
                cachedVersion: cachedVersion, stored: row.map { .row(version: $0.version) } ?? .absent)
            guard outcome == .violation else {
                record(outcome)
                return
            }
            let again = worker.cacheLookup(id: sample.id)
            guard case .hit(let item) = again, item.cas == seenCAS else {
                lookup = again
                continue
            }
            guard ConsistencyVerdict.confirmsAtOnce(row.map { .row(version: $0.version) } ?? .absent) else {
                var later = sample
                later.due = ContinuousClock.now + delay
                later.secondLook = (seenCAS, cachedVersion)
                queue.withLock { $0.append(later) }  // due after every sample already queued
                return
            }
            confirmViolation(sample, cachedVersion: cachedVersion, row: row, worker)
            return
        }
        record(.inconclusive)
    }

    /// The row of `id` (`nil` inside: no such row); `nil` when PostgreSQL did not answer, the
    /// check then recorded inconclusive.
    private func storedRow(of id: Int64, _ worker: ProfileWorker) -> Profile?? {
        do {
            return .some(try worker.store.profile(id: id))
        } catch {
            record(.inconclusive)
            return nil
        }
    }

    /// Counts, logs and repairs a violation: `cachedVersion` stayed in memcached over `row`.
    private func confirmViolation(_ sample: Sample, cachedVersion: Int32, row: Profile?, _ worker: ProfileWorker) {
        record(.violation)
        logger.warning(
            "consistency violation: memcached held an older version than PostgreSQL; repaired",
            metadata: [
                "id": "\(sample.id)", "cached_version": "\(cachedVersion)", "row_version": "\(row?.version ?? 0)",
                "change_version": "\(sample.version)",
            ])
        if let row {
            worker.repository.refresh(after: .changed(id: row.id, version: row.version, row: row))
        } else {
            worker.repository.refresh(after: .deleted(id: sample.id))
        }
    }

    private func record(_ outcome: ConsistencyVerdict.Outcome) {
        counts.withLock { $0[outcome, default: 0] += 1 }
        counters[outcome]?.increment()
    }
}
