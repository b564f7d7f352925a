import MemcachedClient
import Synchronization

/// memcached nodes that may hold entries older than acknowledged writes.
///
/// A node lands here when a write-through to it failed and so did the delete that should have
/// followed: while it was unreachable, writes went on in PostgreSQL. Before this process uses
/// such a node again it flushes it, so a node that comes back never serves older values
/// (DESIGN.md §2). Other processes flush it too when their own write-throughs failed.
final class DirtyNodes: Sendable {
    private let nodes = Mutex<Set<MemcachedServer>>([])
    /// Mirrors `nodes.count` so the hot path skips the lock when nothing is dirty.
    private let count = Atomic<Int>(0)

    init() {}

    var isEmpty: Bool { count.load(ordering: .acquiring) == 0 }

    func insert(_ server: MemcachedServer) {
        nodes.withLock { nodes in
            nodes.insert(server)
            count.store(nodes.count, ordering: .releasing)
        }
    }

    func contains(_ server: MemcachedServer) -> Bool {
        nodes.withLock { $0.contains(server) }
    }

    func remove(_ server: MemcachedServer) {
        nodes.withLock { nodes in
            nodes.remove(server)
            count.store(nodes.count, ordering: .releasing)
        }
    }
}
