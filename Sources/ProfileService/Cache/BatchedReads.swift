import Dispatch
import Synchronization

/// Reads the rows of concurrent misses of different ids with one query (docs/design.md §2.8).
///
/// Group commit, for reads: a worker that needs a row while fewer than ``lanes`` reads of this
/// kind are in flight reads it at once, alone — batching never adds a wait. One that needs a row
/// while every lane is busy queues its id and sleeps; when a read returns, the first queued
/// worker reads every queued id with one query (``ProfileStore/profiles(ids:)``) on its own
/// connection and hands each waiter its row. So the waits that are there anyway (a query's round
/// trip) gather the next batch, and under a storm of misses PostgreSQL answers a few queries of
/// many ids instead of one query per request.
///
/// Only the read is shared: each worker took its own lease before it queued, so every row is read
/// after the lease of the miss it answers, as a single read's is (§2.1); the populate stays the
/// worker's own.
final class BatchedReads: Sendable {
    /// One queued read: its id, and where its row (or the batch's failure) is handed over.
    private final class Request: Sendable {
        let id: Int64
        private let answer = Mutex<Answer?>(nil)
        private let ready = DispatchSemaphore(value: 0)

        enum Answer {
            case row(Profile?)
            case failed(ProfileStoreError)
            /// Read the batch yourself (this request is its first) and hand the others their rows.
            case lead([Request])
        }

        init(id: Int64) { self.id = id }

        func hand(_ answer: Answer) {
            self.answer.withLock { $0 = answer }
            ready.signal()
        }

        func wait() -> Answer {
            ready.wait()
            guard let answer = answer.withLock({ $0 }) else { preconditionFailure("woken without an answer") }
            return answer
        }
    }

    private struct State {
        /// Reads in flight; at ``lanes``, new reads queue.
        var reading = 0
        var queued: [Request] = []
    }

    private let state = Mutex(State())
    /// Reads in flight at most before misses queue for a batch: few, so that batches form under a
    /// storm of misses (PostgreSQL on a few cores gains nothing from more at once), but more than
    /// one, so a slow read does not hold every other miss.
    let lanes: Int
    /// Batches of more than one id read (tests; the metrics count them as `database_batch_read`).
    let batches = Atomic<Int>(0)
    /// Ids read in those batches.
    let batchedIDs = Atomic<Int>(0)
    private let statistics: CacheStatistics?

    /// The most ids one batch reads; more wait for the next.
    static let maximumBatch = 64

    init(lanes: Int = 2, statistics: CacheStatistics? = nil) {
        self.lanes = max(1, lanes)
        self.statistics = statistics
    }

    /// Reads waiting for a batch now (tests).
    var queuedCount: Int { state.withLock { $0.queued.count } }
    /// Lanes in use now (tests).
    var readingCount: Int { state.withLock { $0.reading } }

    /// The row of `id`, read alone or in a batch with other workers' misses; `store` is the
    /// caller's own (it reads the batch when it leads one).
    func row(id: Int64, store: any ProfileStore) throws(ProfileStoreError) -> Profile? {
        let request = Request(id: id)
        let readsAlone = state.withLock { state -> Bool in
            if state.reading >= lanes {
                state.queued.append(request)
                return false
            }
            state.reading += 1
            return true
        }
        if readsAlone {
            defer { handOver() }
            return try store.profile(id: id)
        }
        switch request.wait() {
        case .row(let profile): return profile
        case .failed(let error): throw error
        case .lead(let batch):
            defer { handOver() }
            return try read(batch, store: store)
        }
    }

    /// Reads `batch` (its first request is the caller's) with one query and hands the others
    /// their rows; returns the caller's.
    private func read(_ batch: [Request], store: any ProfileStore) throws(ProfileStoreError) -> Profile? {
        guard batch.count > 1 else { return try store.profile(id: batch[0].id) }
        let rows: [Int64: Profile]
        do {
            rows = try store.profiles(ids: batch.map(\.id))
        } catch {
            for request in batch.dropFirst() { request.hand(.failed(error)) }
            throw error
        }
        batches.add(1, ordering: .relaxed)
        statistics?.record(.databaseBatchRead)
        batchedIDs.add(batch.count, ordering: .relaxed)
        for request in batch.dropFirst() { request.hand(.row(rows[request.id])) }
        return rows[batch[0].id]
    }

    /// After a read: the reads queued meanwhile become the next batch on this lane, led by the
    /// first of them; with none queued, the lane is free.
    private func handOver() {
        let next = state.withLock { state -> [Request]? in
            guard !state.queued.isEmpty else {
                state.reading -= 1
                return nil
            }
            let count = min(state.queued.count, Self.maximumBatch)
            let batch = Array(state.queued.prefix(count))
            state.queued.removeFirst(count)
            return batch
        }
        next?[0].hand(.lead(next ?? []))
    }
}
