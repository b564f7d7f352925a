import ServiceRuntime

/// Reads past the cache (docs/design.md §2.1): an entry older than the reader's `min_version` is
/// answered from PostgreSQL, and the entry is brought up to the row.
///
/// Concurrent reads past the cache of one id share one read, like misses: a read that began after
/// this request arrived answers its floor, whatever it finds. When the row is older than the
/// floor — no such version exists, say a client sent `min_version=2147483647` — the current row is
/// the answer, and a flood of such requests costs one read per id at a time.
extension ProfileRepository {
    /// A read whose entry is below its floor.
    struct PastRead {
        let index: Int
        /// The entry's version (0: a record of absence).
        let cachedVersion: Int32
    }

    /// Reads `pasts` past the cache, into `reads`' answers. Each id joins the reads past the
    /// cache in flight in this process; the leaders wait for their turn
    /// (``ProfileCacheConfiguration/floorReadSpacing``) once, for all of them, read their rows
    /// with one query, settle each entry a newer row replaces, and end their flights before this
    /// batch waits for anyone else's — so two batches that lead and follow each other never wait
    /// on each other. A follower uses its leader's read if it began after this batch arrived (or
    /// meets the floor); else it joins again, up to three times (the next flight begins after the
    /// one that could not answer it ended), and then reads alone.
    func readPast(_ pasts: [PastRead], of reads: inout [KeyRead], since began: ContinuousClock.Instant)
        throws(ProfileStoreError)
    {
        var pending = pasts
        for _ in 0..<3 where !pending.isEmpty {
            var leaders: [(past: PastRead, flight: InFlightReads.Flight)] = []
            var followers: [(past: PastRead, flight: InFlightReads.Flight)] = []
            for past in pending {
                switch shared.inFlight.join(reads[past.index].id) {
                case .leader(let flight): leaders.append((past, flight))
                case .follower(let flight): followers.append((past, flight))
                }
            }
            if !leaders.isEmpty {
                var outcomes: [Int64: InFlightReads.Outcome] = [:]
                defer {
                    for (past, flight) in leaders {
                        let id = reads[past.index].id
                        shared.inFlight.finish(id, flight: flight, outcome: outcomes[id] ?? .failed(.unavailable))
                    }
                }
                // Spaced from the last read of each id past the cache: readers arriving in the wait
                // follow this read, so a flood of unreachable floors is a read per interval.
                let turn = leaders.map { shared.inFlight.turnToReadPastCache(reads[$0.past.index].id, spacing: configuration.floorReadSpacing) }.max()!
                let wait = ContinuousClock.now.duration(to: turn)
                if wait > .zero { sleepThread(for: wait) }
                for leader in leaders { leader.flight.markReadStarted() }
                do {
                    let rows = try readPastRows(leaders.map(\.past), of: &reads)
                    for (past, _) in leaders {
                        let id = reads[past.index].id
                        outcomes[id] = rows[id].map { .found($0, populated: false) } ?? .notFound
                    }
                } catch {
                    for (past, _) in leaders { outcomes[reads[past.index].id] = .failed(error) }
                    throw error
                }
            }
            pending = []
            for (past, flight) in followers {
                let floor = reads[past.index].floor
                let wait = flight.wait(timeout: configuration.coalescedWait, slots: shared.coalescedWaitSlots, since: began)
                switch wait {
                case .usable(.found(let profile, _), let readAfterJoin) where readAfterJoin || profile.version >= floor ?? 0:
                    statistics.record(.coalesced)
                    reads[past.index].answer = .success(Representation(profile, outcome: .bypass))
                case .usable(.notFound, readAfterJoin: true):
                    statistics.record(.coalesced)
                    reads[past.index].answer = .success(nil)
                case .usable(.failed(let error), _):
                    throw error
                case .timedOut, .refused:
                    throw gaveUpWaiting(wait)
                case .usable, .unusable:
                    pending.append(past)
                }
            }
        }
        if !pending.isEmpty { _ = try readPastRows(pending, of: &reads) }
    }

    /// Reads the rows of `pasts` past their entries, brings each entry a newer row replaces up to
    /// it (or clears a lease taken meanwhile) before it is answered, and sets their answers.
    private func readPastRows(_ pasts: [PastRead], of reads: inout [KeyRead]) throws(ProfileStoreError) -> [Int64: Profile] {
        let indices = pasts.map(\.index)
        let rows = try readRows(ids: indices.map { reads[$0].id }, floors: floors(indices, of: reads), after: .now)
        settle(pasts.compactMap { past in
            let read = reads[past.index]
            guard let row = rows[read.id], row.version > past.cachedVersion else { return nil }
            return Settlement(id: read.id, key: read.key, row: row, seenCAS: nil)
        })
        for index in indices {
            reads[index].answer = .success(rows[reads[index].id].map { Representation($0, outcome: .bypass) })
        }
        return rows
    }
}
