import Foundation
public import HTTPServer
public import Logging
import Metrics
public import ServiceRuntime
import Synchronization

/// The process-wide fan-out of profile changes to the event streams (docs/design.md §4).
///
/// Changes come in as ``publish(id:version:)`` (from the change listener, or in-process from the
/// change feed) and as ``publish(_:)`` (this instance's own successful writes, which already have
/// the new profile). A change of an id nobody follows here is dropped at once. Otherwise the
/// profile is fetched through the normal repository read with `minVersion` — blocking work, so
/// on the hub's own fetch threads, never on the event loop — once per (id, version) for all the
/// id's streams, and handed to ``HTTPServer/EventStreams`` as one encoded event. Changes of one id
/// that queue up while a fetch waits collapse into one fetch of the latest.
public final class ProfileUpdateHub: Sendable {
    /// The streams this hub feeds; give the same object to the ``HTTPServer/HTTPServer``.
    public let streams: EventStreams
    /// The `retry:` hint (milliseconds) every stream starts with.
    public let retryMilliseconds: Int
    private let logger: Logger
    private let queue = Mutex(FetchQueue())
    private let wakeUps = DispatchSemaphore(value: 0)
    private let fetchersDone = DispatchGroup()
    let fetches = Atomic<Int>(0)
    private let fetchThreads = Atomic<Int>(0)

    private struct FetchQueue {
        /// Per id: the lowest version the next fetch must return (0: whatever is current),
        /// for ids queued or being fetched.
        var requested: [Int64: Int32] = [:]
        /// Ids waiting for a fetch thread, oldest first.
        var waiting: [Int64] = []
        /// Ids whose next fetch reads PostgreSQL itself (a resynchronisation).
        var fromDatabase: Set<Int64> = []
        /// Ids whose last fetch failed, and how many times in a row: they wait out a backoff
        /// with their `requested` kept (and raised by newer publishes meanwhile).
        var failures: [Int64: Int] = [:]
        var stopped = false
    }

    /// A failed fetch is tried again after 50 ms, doubling up to 2 s, until it succeeds: a dropped
    /// fetch would leave every stream of the id behind until its next change, maybe for ever.
    static func retryDelay(afterFailures failures: Int) -> Duration {
        min(.milliseconds(50 * (1 << min(max(failures - 1, 0), 6))), .seconds(2))
    }

    private let retries = Counter(label: MetricFamily.sseFetchRetries.name)

    public init(streams: EventStreams, retryMilliseconds: Int = 2000, logger: Logger) {
        self.streams = streams
        self.retryMilliseconds = retryMilliseconds
        self.logger = logger
    }

    /// Starts `count` fetch threads; each builds its own worker (PostgreSQL and memcached
    /// connections) with `makeWorker`, on its own thread.
    public func startFetching(threads count: Int, makeWorker: @escaping @Sendable () throws -> ProfileWorker) {
        fetchThreads.add(count, ordering: .relaxed)
        for index in 0..<count {
            fetchersDone.enter()
            let thread = Thread { [self] in
                defer { fetchersDone.leave() }
                runFetcher(makeWorker: makeWorker)
            }
            thread.name = "live-updates-fetch-\(index)"
            thread.start()
        }
    }

    /// The fetch threads as one ``BackgroundService`` of `serve`'s group: `start()` starts
    /// `count` of them (see ``startFetching(threads:makeWorker:)``).
    public func fetchers(
        threads count: Int, makeWorker: @escaping @Sendable () throws -> ProfileWorker
    ) -> any BackgroundService {
        Fetchers(hub: self, count: count, makeWorker: makeWorker)
    }

    private final class Fetchers: BackgroundService {
        let hub: ProfileUpdateHub
        let count: Int
        let makeWorker: @Sendable () throws -> ProfileWorker
        var serviceName: String { "live-update fetchers" }

        init(hub: ProfileUpdateHub, count: Int, makeWorker: @escaping @Sendable () throws -> ProfileWorker) {
            self.hub = hub
            self.count = count
            self.makeWorker = makeWorker
        }

        func start() { hub.startFetching(threads: count, makeWorker: makeWorker) }
        func stop(deadline: ContinuousClock.Instant) -> Bool { hub.stop(deadline: deadline) }
    }

    /// Stops the fetch threads (pending fetches are dropped) and waits for them until `deadline`.
    @discardableResult
    public func stop(deadline: ContinuousClock.Instant = .now + .seconds(5)) -> Bool {
        let threads = queue.withLock { queue -> Bool in
            defer { queue.stopped = true }
            return !queue.stopped
        }
        guard threads else { return true }
        for _ in 0..<fetchThreads.load(ordering: .relaxed) { wakeUps.signal() }
        return fetchersDone.wait(timeout: .after(ContinuousClock.now.duration(to: deadline))) == .success
    }

    /// Profile `id` reached `version` somewhere. Fetches and sends it to the id's streams unless
    /// nobody here follows the id or a version as new was sent already. Version 0 (deleted) is
    /// confirmed in PostgreSQL, then is a `deleted` event on every stream of the id — the last one
    /// of the profile's own streams, which then end — placed at the deleted row's
    /// last version: an older fetch still under way cannot bring the profile back, a new
    /// profile with that id can.
    public func publish(id: Int64, version: Int32) {
        guard version >= 0, streams.isWatched(topic: id) else { return }
        if version == 0 {
            enqueueFetch(id: id, minVersion: 0, fromDatabase: true)
            return
        }
        if let latest = streams.latestPosition(topic: id), latest >= Int64(version) { return }
        enqueueFetch(id: id, minVersion: version)
    }

    /// This instance wrote `profile` (committed and written through): send it as it is, no fetch.
    public func publish(_ profile: Profile) {
        // Most writes have no follower here: skip encoding the event for them.
        guard streams.isWatched(topic: profile.id) else { return }
        publish(id: profile.id, version: profile.version, json: profile.json)
    }

    /// One version's event in both views: the owner's streams get theirs (docs/design.md §13).
    private func publish(id: Int64, version: Int32, json: ProfileJSON) {
        streams.publish(
            topic: id, position: Int64(version), bytes: ProfileEvent.bytes(version: version, json: json.publicView),
            restrictedBytes: json.hasOwnerView ? ProfileEvent.bytes(version: version, json: json.view(.owner)) : nil)
    }

    /// Sends every followed profile's current version to its streams: after the change source was
    /// lost and regained, so no stream stays behind silently. Streams already there get nothing;
    /// a profile deleted meanwhile ends its streams as a deletion does. The profiles are read
    /// from PostgreSQL: what was missed may not have reached memcached either.
    public func resynchronize() {
        let topics = streams.watchedTopics
        for id in topics {
            enqueueFetch(id: id, minVersion: 0, fromDatabase: true)
        }
        if !topics.isEmpty { logger.info("live updates resynchronising", metadata: ["profiles": "\(topics.count)"]) }
    }

    private func enqueueFetch(id: Int64, minVersion: Int32, fromDatabase: Bool = false) {
        let queued = queue.withLock { queue -> Bool in
            guard !queue.stopped else { return false }
            if fromDatabase { queue.fromDatabase.insert(id) }
            if let requested = queue.requested[id] {
                if requested >= minVersion { return false }
                queue.requested[id] = max(requested, minVersion)
                return false
            }
            queue.requested[id] = minVersion
            queue.waiting.append(id)
            return true
        }
        if queued { wakeUps.signal() }
    }

    private func runFetcher(makeWorker: @Sendable () throws -> ProfileWorker) {
        let worker: ProfileWorker
        do {
            worker = try makeWorker()
        } catch {
            logger.error("live updates fetch thread cannot start", metadata: ["error": "\(error)"])
            return
        }
        while true {
            wakeUps.wait()
            let next = queue.withLock { queue -> (Int64, Int32, Bool)?? in
                if queue.stopped { return .some(nil) }
                guard !queue.waiting.isEmpty else { return nil }
                let id = queue.waiting.removeFirst()
                return (id, queue.requested[id] ?? 0, queue.fromDatabase.remove(id) != nil)
            }
            guard let next else { continue }
            guard let (id, minVersion, fromDatabase) = next else { return }
            fetch(id: id, minVersion: minVersion, fromDatabase: fromDatabase, worker: worker)
        }
    }

    private func fetch(id: Int64, minVersion: Int32, fromDatabase: Bool, worker: ProfileWorker) {
        fetches.add(1, ordering: .relaxed)
        var fetched: Int32 = 0
        do {
            let found: (version: Int32, json: ProfileJSON)?
            if fromDatabase {
                let row = try worker.repository.settledRow(id: id)
                found = row.map { ($0.version, $0.json) }
                if found == nil {
                    // Deleted (or never there): its streams learn it at the row's last version.
                    let lastVersion = try worker.store.deletedVersion(id: id) ?? 0
                    streams.closeStreams(
                        topic: id, position: Int64(lastVersion), bytes: ProfileEvent.deleted(id: id, version: lastVersion))
                }
            } else {
                found = try worker.repository.read(id: id, minVersion: minVersion > 0 ? minVersion : nil)
                    .map { ($0.version, $0.json) }
            }
            if let found {
                fetched = found.version
                publish(id: id, version: found.version, json: found.json)
            }
        } catch {
            let failures = queue.withLock { queue -> Int? in
                guard !queue.stopped else { return nil }
                if fromDatabase { queue.fromDatabase.insert(id) }  // the retry still reads PostgreSQL
                queue.failures[id, default: 0] += 1
                return queue.failures[id]
            }
            guard let failures else { return }
            let delay = Self.retryDelay(afterFailures: failures)
            logger.warning(
                "live update fetch failed; retrying", metadata: ["id": "\(id)", "error": "\(error)", "retry_in_ms": "\(delay.totalNanoseconds / 1_000_000)"])
            retries.increment()
            // `requested` stays: the retry fetches the highest version asked for by then.
            DispatchQueue.global().asyncAfter(deadline: .after(delay)) { [self] in
                let queued = queue.withLock { queue -> Bool in
                    guard !queue.stopped, queue.requested[id] != nil else { return false }
                    queue.waiting.append(id)
                    return true
                }
                if queued { wakeUps.signal() }
            }
            return
        }
        let again = queue.withLock { queue -> Bool in
            queue.failures[id] = nil
            guard let requested = queue.requested[id] else { return false }
            if queue.fromDatabase.contains(id), !queue.stopped {
                // A resynchronisation came while this fetch ran: it reads PostgreSQL next.
                queue.waiting.append(id)
                return true
            }
            if requested <= max(fetched, minVersion) || fetched == 0 {
                queue.requested[id] = nil
                return false
            }
            // A newer version was asked for while this fetch ran: fetch once more.
            queue.waiting.append(id)
            return true
        }
        if again { wakeUps.signal() }
    }
}
