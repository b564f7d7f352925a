public import HTTP1
public import HTTPServer

/// Requests answered in batches (docs/design.md §6, §9): one mechanism for every batch a worker
/// takes. The profile reads of a batch are looked up in one multi-get, so under load a worker
/// pays one round trip — one `send`, one wait — for several hits instead of one each, and each
/// hit is answered as soon as it is ready. What a batch does not answer it hands on, typed:
/// from the batch lane, the reads memcached has no entry for as one group (loaded together),
/// the display-name updates as another (made together), everything else alone; from a worker's
/// own batch, each alone, so nothing fast waits behind it. What a batch learned for a request —
/// its entry, its load, its write — is handed to the code that answers that request.
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
        let entries = worker.repository.prefetch(ids: batch.compactMap(\.classified.read?.id))
        var left: [BatchedRequest<ClassifiedRequest>] = []
        var missing: [BatchedRequest<ClassifiedRequest>] = []
        for member in batch {
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
        var updates: [BatchedRequest<ClassifiedRequest>] = []
        for var member in left {
            // Parsed here, once: the worker that answers it uses what this found. Updates and
            // patches alike are made together (docs/design.md §11.2).
            switch member.classified.kind {
            case .write(var write):
                _ = parsedWrite(&write, of: member.request)
                member.classified = ClassifiedRequest(kind: .write(write))
            case .patch(var patch):
                _ = parsedPatch(&patch, of: member.request)
                member.classified = ClassifiedRequest(kind: .patch(patch))
            default:
                break
            }
            if member.classified.update != nil {
                updates.append(member)
            } else {
                handedOn.append([member])
            }
        }
        // The misses load together, the updates are made together: one group each.
        for group in [missing, updates] where !group.isEmpty { handedOn.append(group) }
        return handedOn
    }

    /// A batch another handed on: its reads memcached had no entry for load together (every
    /// lease in one round trip, the rows in one query, every populate in one round trip, each id
    /// under the single read's rules), its updates are made together (one
    /// statement, their write-throughs' round trips shared), and each request is answered from
    /// what was done for it — or alone, when that was nothing.
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
        var written = worker.repository.writeTogether(batch.compactMap(\.classified.update))
        for member in batch {
            var batched: BatchedAnswer?
            if let read = member.classified.read, let answer = loaded[read.id] {
                batched = .read(.loaded(answer))
            } else if let update = member.classified.update, let made = written.removeValue(forKey: update.id), made.made(update) {
                // The first request of each id is the one whose write was made.
                batched = .write(made)
            }
            answer(member, respond(to: member.request, member.classified, worker: worker, started: started, batched: batched))
        }
    }
}

extension ClassifiedRequest {
    /// The profile read it is, if one.
    var read: ProfileRead? {
        if case .read(let read) = kind { read } else { nil }
    }

    /// The update its parsed body asks for (a `PUT` that updates, or a `PATCH`), if one.
    var update: ProfileUpdate? {
        switch kind {
        case .write(let write): write.update
        case .patch(let patch): patch.update
        default: nil
        }
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
