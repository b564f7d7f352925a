extension LocalProfileCache {
    /// Keeps the store bounded: once it holds more than `capacity` ids, forgets the least recently
    /// used ones nobody needs — no observer, no observed list, no edit, no read-your-writes entry
    /// — down to nine tenths of `capacity`, so the scan runs once per tenth of it. When the ids in
    /// use keep it above that, the next scan waits for another tenth of `capacity` to arrive:
    /// publishing to a store full of observed ids costs no scan each.
    func evictIfFull() {
        guard records.count > capacity, records.count >= nextEvictionScanAt else { return }
        evictionScans += 1
        let target = capacity - capacity / 10
        let instant = now()
        let idle = records.filter { id, record in
            record.intents.isEmpty && (record.written.map { $0.expires <= instant } ?? true)
                && !observers.isObserved(id) && !lists.holds(id)
        }
        for (id, _) in idle.sorted(by: { $0.value.lastUse < $1.value.lastUse }).prefix(records.count - target) {
            records[id] = nil
            observers.forget(id)
            metadata.set(nil, for: id)
        }
        nextEvictionScanAt = records.count > target ? records.count + max(1, capacity / 10) : 0
    }

    /// How many ids the store holds (for tests of eviction).
    var count: Int { records.count }
}
