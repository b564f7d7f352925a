import Synchronization

/// Which profile held each handle when this process last answered a lookup of it: a hint, never
/// an answer. A batch reads a hinted profile's entry beside its reads by id, in one multi-get, and
/// answers the lookup only if that profile carries the handle (docs/design.md §12.2); otherwise
/// the handle's own entry decides, as without a hint. So a hint left behind by a rename costs a
/// round trip, never a wrong answer, and needs no invalidation.
///
/// Bounded: each of its shards forgets everything when it fills up (a hint is cheap to learn
/// again: one lookup through the handle's entry).
final class HandleHints: Sendable {
    private final class Shard: Sendable {
        let ids = Mutex<[String: Int64]>([:])
    }

    private let shards: [Shard]
    private let capacityPerShard: Int

    /// - Parameter capacity: the most handles remembered, across the shards.
    init(capacity: Int = 100_000, shards: Int = 16) {
        self.shards = (0..<shards).map { _ in Shard() }
        self.capacityPerShard = max(1, capacity / shards)
    }

    func id(for handle: ProfileHandle) -> Int64? {
        shard(handle).ids.withLock { $0[handle.key] }
    }

    func record(_ handle: ProfileHandle, heldBy id: Int64) {
        shard(handle).ids.withLock { ids in
            guard ids[handle.key] != id else { return }
            if ids.count >= capacityPerShard { ids.removeAll(keepingCapacity: true) }
            ids[handle.key] = id
        }
    }

    private func shard(_ handle: ProfileHandle) -> Shard {
        shards[Int(UInt(bitPattern: handle.key.hashValue) % UInt(shards.count))]
    }
}
