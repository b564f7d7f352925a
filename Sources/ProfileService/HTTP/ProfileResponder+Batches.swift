public import HTTP1
public import HTTPServer

/// Requests a worker takes from the queue together (docs/design.md §6): the cache lookups of
/// the profile reads among them go to memcached as one multi-get, so under load a worker pays
/// one round trip — one `send`, one wait — for several hits instead of one each. Only those
/// hits are answered in the batch (and, when a node failed the multi-get, the reads of its keys,
/// from PostgreSQL, so none waits on that node twice); everything else (writes, misses, reads
/// needing a newer version) goes back to the queue to be answered alone, so nothing fast waits
/// behind it.
extension ProfileResponder {
    /// The most requests a worker takes at once.
    static let maxBatch = 8

    /// The most requests a worker of the batch lane takes at once: one multi-get's worth.
    public var batchLaneLimit: Int { 64 }

    /// Profile reads and writes (docs/design.md §9): a batch of the lane answers the reads' hits
    /// with one multi-get and hands the others on — the misses to be loaded together, the
    /// updates to be made together.
    public func prefersBatchLane(_ request: HTTPRequest) -> Bool {
        Self.cachedReadID(request) != nil || Self.isProfileWrite(request)
    }

    /// The lane's batch: the hits answered from one multi-get, as ``respond(to:worker:answer:)``
    /// answers them; of the rest, the reads memcached has no entry for go on together (their
    /// leases, rows and populates shared, ``respond(together:worker:answer:)``), every other one
    /// (a lease, a floor above the entry, a write) alone.
    public func respondInBatchLane(
        to requests: [HTTPRequest], worker: ProfileWorker, answer: (Int, HTTPResponse) -> Void
    ) -> BatchRemainder {
        var missing: Set<Int> = []
        let left = answerHits(requests, worker: worker, answer: answer, fromCacheOnly: true) { index, id in
            if worker.repository.isMissingFromPrefetch(id: id) { missing.insert(index) }
        }
        var remainder = BatchRemainder()
        var loads: [Int] = []
        var writes: [Int] = []
        for index in left {
            if missing.contains(index) {
                loads.append(index)
            } else if Self.displayNameWrite(requests[index]) != nil {
                writes.append(index)
            } else {
                remainder.alone.append(index)
            }
        }
        // One miss, or one write, gains nothing from company.
        for group in [loads, writes] where !group.isEmpty {
            if group.count == 1 { remainder.alone += group } else { remainder.together.append(group) }
        }
        return remainder
    }

    /// Reads that a batch of the lane found missing from memcached: loaded together (every lease
    /// in one round trip, the rows in one query, every populate in one round trip, each id under
    /// the single read's rules), then each answered as alone, from the load.
    public func respond(together requests: [HTTPRequest], worker: ProfileWorker, answer: (Int, HTTPResponse) -> Void) {
        if requests.first.map(Self.isProfileWrite) == true {
            return respond(writingTogether: requests, worker: worker, answer: answer)
        }
        let members = ProfileListRequest(
            mentions: requests.compactMap { request in
                Self.cachedReadID(request).map { .init(id: $0, floor: (try? Self.readFloor(of: request)) ?? nil) }
            }
        ).members
        // Each answer is timed from the start of the load it waited for.
        worker.batchStarted = .now
        defer { worker.batchStarted = nil }
        worker.repository.loadingTogether(members) {
            for (index, request) in requests.enumerated() { answer(index, respond(to: request, worker: worker)) }
        }
    }

    /// Several while the worker's requests are mostly profile reads and those mostly hit; one
    /// otherwise (writes, misses): a batch would give most of its requests back, and each would
    /// be taken from the queue twice.
    public func batchLimit(worker: ProfileWorker) -> Int {
        worker.batchPolicy.readsDominate && worker.repository.prefersBatches ? Self.maxBatch : 1
    }

    public func respond(to requests: [HTTPRequest], worker: ProfileWorker, answer: (Int, HTTPResponse) -> Void)
        -> [Int]
    {
        answerHits(requests, worker: worker, answer: answer, fromCacheOnly: false) { _, _ in }
    }

    /// The batch's hits, each answered as soon as it is ready; returns the positions of the
    /// others. `left` sees the position and id of each read left, while its prefetched entry is
    /// still known.
    /// `fromCacheOnly` (the lane) leaves the reads of a node that failed the multi-get too, which
    /// a worker's batch answers from PostgreSQL at once: the lane never waits on PostgreSQL.
    private func answerHits(
        _ requests: [HTTPRequest], worker: ProfileWorker, answer: (Int, HTTPResponse) -> Void, fromCacheOnly: Bool,
        left noteLeft: (Int, Int64) -> Void
    ) -> [Int] {
        let ids = requests.map(Self.cachedReadID)
        worker.batchStarted = .now
        defer { worker.batchStarted = nil }
        return worker.repository.prefetching(ids: ids.compactMap { $0 }) {
            var left: [Int] = []
            for (index, request) in requests.enumerated() {
                // An unparsable min_version answers 400 at once, which is quick too. A floor
                // (min_version, If-None-Match) above the prefetched entry goes back to be read alone.
                let floor = (try? Self.readFloor(of: request)) ?? nil
                if let id = ids[index], worker.repository.answersFromPrefetch(id: id, minVersion: floor),
                    !fromCacheOnly || !worker.repository.failedInPrefetch(id: id)
                {
                    answer(index, respond(to: request, worker: worker))
                } else {
                    if let id = ids[index] { noteLeft(index, id) }
                    left.append(index)
                }
            }
            return left
        }
    }

    /// Whether a request is a `GET` or `HEAD` under the profile route (what ``BatchPolicy`` counts).
    static func isProfileRead(_ request: HTTPRequest) -> Bool {
        (request.method == .get || request.method == .head) && request.path.hasPrefix(profilePathPrefix)
    }

    /// The id a request reads from the cache: `GET` or `HEAD` of a profile (not its event stream).
    static func cachedReadID(_ request: HTTPRequest) -> Int64? {
        guard isProfileRead(request), !request.path.hasSuffix(eventsSuffix), !acceptsEventStream(request) else {
            return nil
        }
        return try? profileID(from: request.path)
    }
}

/// Whether a worker's recent requests are mostly profile reads (a moving share over about 16
/// requests), which is when taking several at once pays.
struct BatchPolicy {
    /// Recent profile reads as a share of recent requests, in 1/1024.
    private var readShare = 1024

    var readsDominate: Bool { readShare >= 512 }

    mutating func record(profileRead: Bool) {
        readShare += ((profileRead ? 1024 : 0) - readShare) / 16
    }
}
