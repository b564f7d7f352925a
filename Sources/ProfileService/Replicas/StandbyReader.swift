public import PostgresClient

/// Rows a PostgreSQL standby may read instead of the primary (docs/design.md §8): one value per
/// worker thread, like its ``ProfileStore``.
///
/// A standby answers only once it has replayed `position`, a position of the primary's WAL that
/// the caller took after its read began (after its lease, for a populate). Every commit
/// acknowledged before then — so every version the cache can have held, from any writer — lies
/// at or below that position: the rows a standby reads after replaying it are at least as new.
public protocol StandbyReader {
    /// Whether some standby may be read now; when none may, a caller need not take a position.
    var hasUsableStandby: Bool { get }
    /// The profile with this id (`nil`: none) as a standby that has replayed `position` has it.
    func profile(id: Int64, replayedThrough position: LSN) -> StandbyAnswer<Profile?>
    /// The profiles with these ids that exist, as a standby that has replayed `position` has them.
    func profiles(ids: [Int64], replayedThrough position: LSN) -> StandbyAnswer<[Int64: Profile]>
}

/// What a standby read came to; anything but ``read(_:)`` sends the read to the primary.
public enum StandbyAnswer<Value> {
    /// Read from a standby that had replayed the position before the read.
    case read(Value)
    /// Every standby that answered had not replayed the position yet.
    case behind
    /// No standby could be asked: none usable, or each failed.
    case unavailable
}

/// The second rule of a standby's answer, for a read with a floor (`min_version`, a list's
/// `id@version`, `If-None-Match`): the row must be at or above it. The floor is the version the
/// client holds, so an answer below it — or a 404 for a row the client has seen — would send the
/// client back in time; the primary answers those. (A proven row below a floor is the current
/// row, as the primary's would be; the primary still answers it, so the rule holds even for a
/// standby whose replay position were wrong.)
public enum StandbyFloorRule {
    public static func accepts(_ row: Profile?, floor: Int32?) -> Bool {
        guard let floor else { return true }
        guard let row else { return false }
        return row.version >= floor
    }
}
