public import HTTP1
public import HTTPServer

/// Requests answered in batches (docs/design.md §6, §9): one mechanism for every batch a worker
/// takes. The profile reads of a batch are looked up in one multi-get, so under load a worker
/// pays one round trip — one `send`, one wait — for several hits instead of one each, and each
/// hit is answered as soon as it is ready. What a batch does not answer it hands on, typed:
/// from the batch lane, the reads memcached has no entry for as one group (loaded together),
/// the writes and patches as another, their bodies unparsed (the worker that takes the group
/// parses them and makes their updates together), everything else alone; from a worker's own
/// batch, each alone, so nothing fast waits behind it. What a batch learned for a request —
/// its entry, its load, its parsed body and its write — is handed to the code that answers it.
extension ProfileResponder {
    /// The most requests a worker takes from the queue at once.
    static let maxBatch = 8

    /// Several while the worker's requests are mostly profile reads and those mostly hit; one
    /// otherwise (writes, misses): a batch would give most of its requests back, and each would
    /// be taken from the queue twice.
    public func batchLimit(worker: ProfileWorker) -> Int {
        worker.batchPolicy.readsDominate && worker.repository.prefersBatches ? Self.maxBatch : 1
    }

    public func respond(
        to batch: [BatchedRequest<ClassifiedRequest>], from origin: BatchOrigin, worker: ProfileWorker,
        answer: (BatchedRequest<ClassifiedRequest>, HTTPResponse) -> Void
    ) -> [[BatchedRequest<ClassifiedRequest>]] {
        switch origin {
        case .handedOn:
            answerTogether(batch, worker: worker, answer: answer)
            return []
        case .queue where batch.count == 1:
            answer(batch[0], respond(to: batch[0].request, batch[0].classified, worker: worker))
            return []
        case .queue, .lane:
            return answerHits(batch, inLane: origin == .lane, worker: worker, answer: answer)
        }
    }

    /// Answers the batch's hits from one multi-get and returns what it hands on. In the lane, the
    /// reads of a node that failed the multi-get are handed on too (a worker's batch answers them
    /// from PostgreSQL at once): the lane never waits on PostgreSQL.
    private func answerHits(
        _ batch: [BatchedRequest<ClassifiedRequest>], inLane: Bool, worker: ProfileWorker,
        answer: (BatchedRequest<ClassifiedRequest>, HTTPResponse) -> Void
    ) -> [[BatchedRequest<ClassifiedRequest>]] {
        let started = ContinuousClock.now
        // Lookups by handle read their hinted profiles in the reads' multi-get; the handles that
        // hints do not decide are looked up in memcached (docs/design.md §12.2).
        let lookups = Self.handleLookups(of: batch)
        let ids = batch.compactMap(\.classified.read?.id)
        let entries: [Int64: ProfileRepository.Prefetch]
        var handles: [ProfileHandle: ProfileRepository.HandleAnswer] = [:]
        if lookups.isEmpty {
            entries = worker.repository.prefetch(ids: ids)
        } else {
            let hints = worker.repository.handleHints(lookups.map(\.handle))
            entries = worker.repository.prefetch(ids: Array(Set(ids + hints.values)))
            handles = worker.repository.lookUp(lookups, hints: hints, prefetched: entries)
            let undecided = lookups.filter { handles[$0.handle] == nil }
            if !undecided.isEmpty { handles.merge(worker.repository.lookUpFromCache(undecided)) { found, _ in found } }
        }
        var left: [BatchedRequest<ClassifiedRequest>] = []
        var missing: [BatchedRequest<ClassifiedRequest>] = []
        for member in batch {
            if let lookup = member.classified.handleRead {
                // Decided by memcached, or looked up alone (it may need PostgreSQL).
                if let found = handles[lookup.handle] {
                    answer(member, respond(to: member.request, member.classified, worker: worker, started: started, batched: .handle(found)))
                } else {
                    left.append(member)
                }
                continue
            }
            guard let read = member.classified.read, let entry = entries[read.id] else {
                left.append(member)
                continue
            }
            if case .failed = entry, inLane {
                left.append(member)
            } else if entry.answers(minVersion: read.floor) {
                let response = respond(
                    to: member.request, member.classified, worker: worker, started: started, batched: .read(.prefetched(entry)))
                answer(member, response)
            } else if case .missing = entry, inLane {
                missing.append(member)
            } else {
                // A floor above the entry: read alone.
                left.append(member)
            }
        }
        guard inLane else { return left.map { [$0] } }
        var handedOn: [[BatchedRequest<ClassifiedRequest>]] = []
        var writes: [BatchedRequest<ClassifiedRequest>] = []
        for member in left {
            // Unparsed: the lane never waits on a body's parse; the group's worker parses it.
            if member.classified.isWrite { writes.append(member) } else { handedOn.append([member]) }
        }
        // The misses load together, the writes go to one worker: one group each.
        for group in [missing, writes] where !group.isEmpty { handedOn.append(group) }
        return handedOn
    }

    /// A batch another handed on: its reads memcached had no entry for load together (every
    /// lease in one round trip, the rows in one query, every populate in one round trip, each id
    /// under the single read's rules); its writes' bodies are parsed, each once, and their
    /// updates made together (one statement, their write-throughs' round trips shared,
    /// docs/design.md §11.2); each request is answered from what was done for it — or alone,
    /// when that was nothing (a creation, a refused body).
    private func answerTogether(
        _ batch: [BatchedRequest<ClassifiedRequest>], worker: ProfileWorker,
        answer: (BatchedRequest<ClassifiedRequest>, HTTPResponse) -> Void
    ) {
        guard batch.count > 1 else {
            for member in batch { answer(member, respond(to: member.request, member.classified, worker: worker)) }
            return
        }
        // Each answer is timed from the start of the work it waited for.
        let started = ContinuousClock.now
        let reads = batch.compactMap(\.classified.read)
        let loaded = worker.repository.loadTogether(reads.map { ProfileListRequest.Member(id: $0.id, floor: $0.floor) })
        let parsed = batch.map { parsedWrite($0.request, $0.classified) }
        var written = worker.repository.writeTogether(parsed.compactMap { $0?.update })
        for (member, write) in zip(batch, parsed) {
            var batched: BatchedAnswer?
            if let read = member.classified.read, let answer = loaded[read.id] {
                batched = .read(.loaded(answer))
            } else if let write {
                // The first request of each id is the one whose write was made; the others of
                // the id, the creations and the refused bodies are answered alone.
                var made: ProfileRepository.WrittenTogether?
                if let update = write.update, let outcome = written.removeValue(forKey: update.id), outcome.made(update) {
                    made = outcome
                }
                batched = .write(write, made: made)
            }
            answer(member, respond(to: member.request, member.classified, worker: worker, started: started, batched: batched))
        }
    }

    /// The batch's lookups by handle, each handle once at the highest floor asked of it (an answer
    /// at that floor answers every request of the handle).
    private static func handleLookups(of batch: [BatchedRequest<ClassifiedRequest>]) -> [(handle: ProfileHandle, floor: Int32?)] {
        var floors: [ProfileHandle: Int32] = [:]  // 0: no floor
        var order: [ProfileHandle] = []
        for case let lookup? in batch.map(\.classified.handleRead) {
            if floors[lookup.handle] == nil { order.append(lookup.handle) }
            floors[lookup.handle] = max(floors[lookup.handle] ?? 0, lookup.floor ?? 0)
        }
        return order.map { handle in (handle, floors[handle].flatMap { $0 > 0 ? $0 : nil }) }
    }

    /// A write or patch with its body parsed; nil for any other request.
    private func parsedWrite(_ request: HTTPRequest, _ classified: ClassifiedRequest) -> ParsedWrite? {
        switch classified.kind {
        case .write(let write): parsedWrite(write, request)
        case .patch(let patch): parsedWrite(patch, request)
        default: nil
        }
    }
}

/// What a batch learned for one of its requests, handed to the code that answers it.
enum BatchedAnswer {
    case read(ProfileRepository.BatchedRead)
    /// A lookup by handle that memcached decided (``ProfileRepository/lookUpFromCache(_:)``).
    case handle(ProfileRepository.HandleAnswer)
    /// A write's parsed body, and what its group made of it (nil: nothing, it is made alone).
    case write(ParsedWrite, made: ProfileRepository.WrittenTogether?)

    /// The parsed write and what was made of it, when it is a write's.
    var written: (ParsedWrite, ProfileRepository.WrittenTogether?)? {
        if case .write(let parsed, let made) = self { (parsed, made) } else { nil }
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
