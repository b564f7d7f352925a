import Logging
import MemcachedClient

/// Writes made together (docs/design.md §9.4): the updates of several requests in one statement,
/// their write-through's first looks in one round trip beside it, and every later step of their
/// write-throughs for all of them at once — each id still under the rules of a single write (§2.2).
extension ProfileRepository {
    /// What a write made together came to, for the request that asked for it: its outcome, with
    /// the cache already settled for it.
    public struct WrittenTogether {
        let write: ProfileUpdate
        let outcome: Result<ProfileUpdateOutcome, ProfileStoreError>

        /// Whether this is what `write` made: a request whose write is another (a second write of
        /// the id in the batch) makes its own.
        public func made(_ write: ProfileUpdate) -> Bool { self.write == write }
    }

    /// Makes `writes` together, for each request to be answered from its own write's outcome
    /// (``update(_:madeTogether:)``, after ``WrittenTogether/made(_:)`` says it is that write).
    ///
    /// - Returns: what each write made here came to, by id: the first write of each id in
    ///   `writes`, when it changed its row or its outcome is unknown. A write not among them — a
    ///   second write of an id, or one that changed nothing (its row gone or changed since, or the
    ///   statement refused) — is made alone by its request, which tells a conflict from a
    ///   deletion as ever.
    public func writeTogether(_ writes: [ProfileUpdate]) -> [Int64: WrittenTogether] {
        // One write per id (another for the same id goes alone, after), in id order, the order
        // the statement locks rows in (it skips rows locked elsewhere, so it never waits anyway).
        var seen = Set<Int64>()
        let writes = writes.filter { seen.insert($0.id).inserted }.sorted { $0.id < $1.id }
        guard writes.count > 1 else { return [:] }
        statistics.record(.databaseBatchWrite)
        let (updated, looks) = writing(writes.map(\.id)) { () throws(ProfileStoreError) in try store.updateProfiles(writes) }
        var made: [(write: ProfileUpdate, written: Result<ProfileUpdateOutcome, ProfileStoreError>, look: LeaseAttempt?)] = []
        var notMade: [String] = []
        for (write, look) in zip(writes, looks) {
            switch updated {
            case .success(let rows?):
                if let profile = rows[write.id] {
                    made.append((write, .success(.updated(profile)), look))
                } else if look?.ownCAS != nil {
                    // Changed since, gone, or its row locked elsewhere: the request's own write
                    // tells which (and waits for the lock, as any single write does).
                    notMade.append(configuration.key(for: write.id))
                }
            case .success(nil):
                // Refused, nothing changed: each request writes alone.
                if look?.ownCAS != nil { notMade.append(configuration.key(for: write.id)) }
            case .failure(let error):
                // Unknown outcome or no database: each request answers as a single write's would.
                made.append((write, .failure(error), look))
            }
        }
        forget(notMade)  // their looks' leases: readers would wait on them until they expire
        settle(made)
        var together: [Int64: WrittenTogether] = [:]
        for (write, written, _) in made { together[write.id] = WrittenTogether(write: write, outcome: written) }
        return together
    }
}
