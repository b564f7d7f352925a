public import HTTP1
import HTTPServer

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

    /// Several while the worker's requests are mostly profile reads and those mostly hit; one
    /// otherwise (writes, misses): a batch would give most of its requests back, and each would
    /// be taken from the queue twice.
    public func batchLimit(worker: ProfileWorker) -> Int {
        worker.batchPolicy.readsDominate && worker.repository.prefersBatches ? Self.maxBatch : 1
    }

    public func respond(to requests: [HTTPRequest], worker: ProfileWorker, answer: (Int, HTTPResponse) -> Void)
        -> [Int]
    {
        let ids = requests.map(Self.cachedReadID)
        worker.batchStarted = .now
        defer { worker.batchStarted = nil }
        return worker.repository.prefetching(ids: ids.compactMap { $0 }) {
            var left: [Int] = []
            for (index, request) in requests.enumerated() {
                // An unparsable min_version answers 400 at once, which is quick too. A floor
                // (min_version, If-None-Match) above the prefetched entry goes back to be read alone.
                let floor = (try? Self.readFloor(of: request)) ?? nil
                if let id = ids[index], worker.repository.answersFromPrefetch(id: id, minVersion: floor) {
                    answer(index, respond(to: request, worker: worker))
                } else {
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
