/// Which multi-id event streams follow which ids, as a value: ``FollowedStreams`` tells it each id
/// followed and let go, and asks it at each settled moment which streams to close and which to
/// open. No I/O.
///
/// A stream, once open, keeps the ids it was opened with (the service's list streams cannot
/// change theirs). So the rules, in order:
/// - Ids that appeared together get a stream of their own; the streams already open stay as they
///   are: a stream is reconnected only when the set of ids it serves changes.
/// - A stream none of whose ids is followed any more is closed.
/// - A stream of which more than half the ids are no longer followed is closed when new ids need
///   a stream, and the ids it still serves join theirs: no stream serves mostly ids nobody shows.
/// - At most ``maximumStreams`` streams (more only when the ids need more, 1,000 a stream): past
///   that, the streams serving the fewest ids are folded into the new one — a slow scroll, a few
///   rows a moment, reconnects a few rows, never the screen.
///
/// So a list scrolled by whole screens opens one stream per screen and closes the one that left;
/// scrolled by half screens, it keeps two streams (the halves on screen) and reconnects none.
struct StreamLayout {
    /// The most streams kept open for the ids followed, unless they need more.
    static let maximumStreams = 4

    struct Stream: Equatable {
        /// The ids it was opened with, in order.
        let ids: [Int64]
        /// The ids of ``ids`` still followed.
        var followed: Set<Int64>
    }

    /// A moment's changes: the streams to close (first) and those to open.
    struct Changes: Equatable {
        var closed: [UInt64] = []
        var opened: [(key: UInt64, ids: [Int64])] = []

        var isEmpty: Bool { closed.isEmpty && opened.isEmpty }

        static func == (lhs: Changes, rhs: Changes) -> Bool {
            lhs.closed == rhs.closed && lhs.opened.map(\.key) == rhs.opened.map(\.key)
                && lhs.opened.map(\.ids) == rhs.opened.map(\.ids)
        }
    }

    /// How many follows of each id run.
    private var counts: [Int64: Int] = [:]
    /// The ids followed that no stream serves, in the order they were first followed.
    private var waiting: [Int64] = []
    private var waitingSet: Set<Int64> = []
    /// The stream serving each followed id.
    private var streamOf: [Int64: UInt64] = [:]
    private(set) var streams: [UInt64: Stream] = [:]
    private var nextKey: UInt64 = 0
    /// Something changed since the last ``settle(chunk:)``.
    private(set) var isUnsettled = false

    /// The ids followed now.
    var followedIDs: Set<Int64> { Set(counts.keys) }

    /// One more follow of `id`.
    /// An id whose stream ended (refused for good) waits for a new stream with its next follow.
    mutating func follow(_ id: Int64) {
        counts[id, default: 0] += 1
        if let key = streamOf[id] {
            streams[key]?.followed.insert(id)  // let go of and followed again before a settle
            return
        }
        guard !waitingSet.contains(id) else { return }
        waiting.append(id)
        waitingSet.insert(id)
        isUnsettled = true
    }

    /// One follow of `id` less; the last one lets it go.
    mutating func letGo(_ id: Int64) {
        guard let count = counts[id] else { return }
        guard count == 1 else {
            counts[id] = count - 1
            return
        }
        counts[id] = nil
        if waitingSet.remove(id) != nil { waiting.removeAll { $0 == id } }
        if let key = streamOf[id] { streams[key]?.followed.remove(id) }
        isUnsettled = true
    }

    /// The streams to close and to open now.
    /// - Parameter chunk: splits ids into streams (at most 1,000 ids, and a request line that fits).
    mutating func settle(chunk: ([Int64]) -> [[Int64]]) -> Changes {
        isUnsettled = false
        var changes = Changes()
        for (key, stream) in streams where stream.followed.isEmpty { close(key, into: &changes) }
        guard !waiting.isEmpty else { return changes }
        var newIDs: [Int64] = []
        for (key, stream) in streams where stream.followed.count * 2 < stream.ids.count {
            newIDs += stream.ids.filter(stream.followed.contains)
            close(key, into: &changes)
        }
        newIDs += waiting
        // Fold the streams serving the fewest ids into the new one until the count fits.
        let smallestFirst = streams.sorted { ($0.value.followed.count, $0.key) < ($1.value.followed.count, $1.key) }
        for (key, stream) in smallestFirst where streams.count + chunk(newIDs).count > Self.maximumStreams {
            newIDs = stream.ids.filter(stream.followed.contains) + newIDs
            close(key, into: &changes)
        }
        waiting = []
        waitingSet = []
        for ids in chunk(newIDs) {
            nextKey += 1
            streams[nextKey] = Stream(ids: ids, followed: Set(ids))
            for id in ids { streamOf[id] = nextKey }
            changes.opened.append((nextKey, ids))
        }
        return changes
    }

    /// The stream `key` ended by itself (the service refused it for good): its ids stay
    /// followed, without a stream, until they are followed again.
    mutating func streamEnded(_ key: UInt64) {
        var ignored = Changes()
        close(key, into: &ignored)
    }

    private mutating func close(_ key: UInt64, into changes: inout Changes) {
        guard let stream = streams.removeValue(forKey: key) else { return }
        for id in stream.ids where streamOf[id] == key { streamOf[id] = nil }
        changes.closed.append(key)
    }
}
