import PostgresClient

/// Changes the feed could not apply because their memcached node did not answer, kept to be
/// tried again. While any is held, the position confirmed to PostgreSQL stays before the batch
/// that brought it, so a crash meanwhile replays it (at-least-once; docs/design.md §3).
struct PendingRepairs {
    private struct Entry {
        var change: ProfileChange
        /// The position confirmed at most while this change is unapplied.
        var holdsBack: LSN
    }

    private var entries: [Int64: Entry] = [:]

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }

    /// The earliest position a pending change holds back, `nil` when none is pending.
    var holdsBack: LSN? { entries.values.map(\.holdsBack).min() }

    var changes: [ProfileChange] { entries.values.map(\.change) }

    /// `change` failed; `position` is where the feed stood before the batch that brought it.
    mutating func hold(_ change: ProfileChange, confirmedBefore position: LSN) {
        let holdsBack = min(entries[change.id]?.holdsBack ?? position, position)
        entries[change.id] = Entry(change: change, holdsBack: holdsBack)
    }

    /// A change to `id` was applied: it supersedes any older one held for the id.
    mutating func release(_ id: Int64) {
        entries[id] = nil
    }
}
