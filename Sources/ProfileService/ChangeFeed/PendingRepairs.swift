import MemcachedClient
import PostgresClient

/// What the feed owes before it may confirm a position (docs/design.md §3.3): row repairs whose
/// memcached node did not answer, `flush_all`s (after a TRUNCATE or a gap) that did not reach
/// their node, and announcements NOTIFY did not take. Each holds back the position the feed stood
/// at before the batch that brought it, so a crash meanwhile replays that batch (at-least-once).
///
/// A value: the consumer does the I/O and tells it what landed.
struct PendingRepairs {
    private struct Row {
        var change: ProfileChange
        var holdsBack: LSN
    }

    private var rows: [Int64: Row] = [:]
    /// Nodes a `flush_all` still has to reach, and the earliest position each holds back.
    private(set) var flushes: [MemcachedServer: LSN] = [:]
    /// Announcements not yet sent, in commit order.
    private(set) var announcements: [(changes: [ProfileChange], holdsBack: LSN)] = []

    /// Held row repairs and flushes: what memcached still has to take (backpressure, metrics).
    var count: Int { rows.count + flushes.count }
    var isEmpty: Bool { rows.isEmpty && flushes.isEmpty && announcements.isEmpty }

    /// The earliest position anything pending holds back, `nil` when nothing is pending.
    var holdsBack: LSN? {
        let earliest = [
            rows.values.lazy.map(\.holdsBack).min(), flushes.values.min(), announcements.lazy.map(\.holdsBack).min(),
        ]
        return earliest.compactMap { $0 }.min()
    }

    var changes: [ProfileChange] { rows.values.map(\.change) }

    /// `change` failed; `position` is where the feed stood before the batch that brought it.
    mutating func hold(_ change: ProfileChange, confirmedBefore position: LSN) {
        let holdsBack = min(rows[change.id]?.holdsBack ?? position, position)
        rows[change.id] = Row(change: change, holdsBack: holdsBack)
    }

    /// A change to `id` was applied: it supersedes any older one held for the id.
    mutating func release(_ id: Int64) {
        rows[id] = nil
    }

    /// The `flush_all` of `node` failed: it may serve entries older than their rows until it lands.
    mutating func holdFlush(of node: MemcachedServer, confirmedBefore position: LSN) {
        flushes[node] = min(flushes[node] ?? position, position)
    }

    mutating func releaseFlush(of node: MemcachedServer) {
        flushes[node] = nil
    }

    /// NOTIFY did not take `changes`; they are sent again before the position moves past them.
    mutating func holdAnnouncement(_ changes: [ProfileChange], confirmedBefore position: LSN) {
        guard !changes.isEmpty else { return }
        announcements.append((changes, position))
    }

    /// Takes every held announcement, oldest first, to be sent again.
    mutating func takeAnnouncements() -> [ProfileChange] {
        defer { announcements = [] }
        return announcements.flatMap(\.changes)
    }

    /// The position the oldest held announcement holds back (for sending it again under it).
    var announcementsHoldBack: LSN? { announcements.lazy.map(\.holdsBack).min() }
}
