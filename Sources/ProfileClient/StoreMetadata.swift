import Foundation

/// What the store says of each id beside the events it publishes — whether its profile came from
/// the persisted store, when the service last confirmed it, whether edits of it wait — for readers
/// that cannot wait for the store's actor (``ObservableProfiles``, on the main actor). Set by
/// ``LocalProfileCache`` before it publishes the id's state, so an event's reader finds what
/// goes with it.
final class StoreMetadata: Sendable {
    struct Item: Sendable, Hashable {
        var isFromStore: Bool
        var confirmedAt: Date?
        var hasPendingEdits: Bool

        init(_ record: LocalProfileCache.Record) {
            isFromStore = record.isFromStore
            confirmedAt = record.confirmedAt
            hasPendingEdits = !record.intents.isEmpty
        }
    }

    private let items = LockedValue<[Int64: Item]>([:])

    subscript(id: Int64) -> Item? {
        items.withLock { $0[id] }
    }

    func set(_ item: Item?, for id: Int64) {
        items.withLock { $0[id] = item }
    }

    func removeAll() {
        items.withLock { $0 = [:] }
    }
}
