import Metrics
import Synchronization

/// A closed set of events counted since start: each in an atomic (read by tests, `/readyz` and
/// snapshots without a lock) and exported as the series of `family` with its `event` label.
/// Recording is one atomic add and one backend increment, on any thread.
final class EventCounters<Event: CaseIterable & Hashable & Sendable>: Sendable where Event.AllCases.Index == Int {
    private final class Counter: @unchecked Sendable {  // Metrics.Counter is a thread-safe class
        let value = Atomic<Int>(0)
        let exported: Metrics.Counter

        init(_ family: MetricFamily, label: String) {
            exported = Metrics.Counter(label: family.name, dimensions: [("event", label)])
        }
    }

    private let counters: [Counter]
    private let position: @Sendable (Event) -> Int

    /// - Parameters:
    ///   - label: the `event` label of each event.
    ///   - position: the event's place in `Event.allCases`, computed without searching (say, its
    ///     `Int` raw value); by default it is searched for.
    init(
        _ family: MetricFamily, label: (Event) -> String,
        position: @escaping @Sendable (Event) -> Int = { Event.allCases.firstIndex(of: $0)! }
    ) {
        counters = Event.allCases.map { Counter(family, label: label($0)) }
        self.position = position
    }

    /// `count` events at once (say, a list's hits: one atomic add, not one per member).
    func record(_ event: Event, count: Int = 1) {
        guard count > 0 else { return }
        let counter = counters[position(event)]
        counter.value.add(count, ordering: .relaxed)
        counter.exported.increment(by: count)
    }

    func count(_ event: Event) -> Int {
        counters[position(event)].value.load(ordering: .relaxed)
    }
}
