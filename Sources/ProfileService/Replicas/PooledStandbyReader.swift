public import Logging
public import PostgresClient
import ServiceRuntime
import Synchronization

/// The workers' reads from standbys over a bounded number of ``PostgresStandbyReader``s (each
/// one connection to every standby), so that a standby sees as many connections from an
/// instance as the primary does, however many workers there are (docs/design.md §9).
///
/// A read borrows a reader for its position check and its row and gives it back; readers are
/// made on first need, the n-th starting its round of the standbys at standby n.
public final class PooledStandbyReader: StandbyReader, Sendable {
    private let replicas: ReadReplicas
    private let readers: BorrowPool<PostgresStandbyReader>

    /// - Parameter size: Readers at most, so connections to each standby at most.
    public init(replicas: ReadReplicas, size: Int, profileFields: ProfileFieldCatalog = .standard, logger: Logger) {
        self.replicas = replicas
        let made = Counter()
        readers = BorrowPool(
            capacity: size,
            make: { PostgresStandbyReader(replicas: replicas, first: made.next(), profileFields: profileFields, logger: logger) },
            handOff: { $0.releaseOwnerThread() })
    }

    public var hasUsableStandby: Bool { replicas.standbys.contains { $0.isUsable } }

    public func profile(id: Int64, replayedThrough position: LSN) -> StandbyAnswer<Profile?> {
        readers.borrow { $0.profile(id: id, replayedThrough: position) }
    }

    public func profiles(ids: [Int64], replayedThrough position: LSN) -> StandbyAnswer<[Int64: Profile]> {
        readers.borrow { $0.profiles(ids: ids, replayedThrough: position) }
    }

    /// Closes the idle readers' connections; call it once the workers are done.
    public func close() {
        readers.forEachIdle { $0.close() }
    }
}

/// Numbers the readers a pool makes.
private final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    func next() -> Int { value.add(1, ordering: .relaxed).oldValue }
}
