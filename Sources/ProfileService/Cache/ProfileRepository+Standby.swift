import PostgresClient

/// Where the rows of misses come from (docs/design.md §8): a standby, when it proves it has
/// replayed a position of the primary taken after the read began and its row meets the read's
/// floor; the primary otherwise. Writes, refreshes and the live updates' reads stay on the primary.
extension ProfileRepository {
    /// The row of `id` as of a moment after `began`, from a standby when one may answer.
    func readRow(id: Int64, floor: Int32?, after began: ContinuousClock.Instant) throws(ProfileStoreError) -> Profile? {
        if let standby, let position = standbyPosition(after: began) {
            switch standby.profile(id: id, replayedThrough: position) {
            case .read(let row):
                if StandbyFloorRule.accepts(row, floor: floor) {
                    statistics.record(.standbyRead)
                    return row
                }
                statistics.record(.standbyBelowFloor)
            case .behind:
                statistics.record(.standbyBehind)
            case .unavailable:
                statistics.record(.standbyUnavailable)
            }
        }
        statistics.record(.databaseRead)
        return try store.profile(id: id)
    }

    /// The rows of `ids` that exist, as of a moment after `began`: from a standby when one may
    /// answer, except the members whose floor its rows do not meet, which one query reads from
    /// the primary.
    func readRows(ids: [Int64], floors: [Int64: Int32], after began: ContinuousClock.Instant) throws(ProfileStoreError)
        -> [Int64: Profile]
    {
        var rows: [Int64: Profile] = [:]
        var fromPrimary = ids
        if let standby, let position = standbyPosition(after: began) {
            switch standby.profiles(ids: ids, replayedThrough: position) {
            case .read(let standbyRows):
                fromPrimary = []
                for id in ids {
                    if StandbyFloorRule.accepts(standbyRows[id], floor: floors[id]) {
                        rows[id] = standbyRows[id]
                    } else {
                        fromPrimary.append(id)
                    }
                }
                statistics.record(.standbyRead, count: ids.count - fromPrimary.count)
                statistics.record(.standbyBelowFloor, count: fromPrimary.count)
            case .behind:
                statistics.record(.standbyBehind)
            case .unavailable:
                statistics.record(.standbyUnavailable)
            }
        }
        guard !fromPrimary.isEmpty else { return rows }
        statistics.record(.databaseRead, count: fromPrimary.count)
        statistics.record(.databaseBatchRead)
        rows.merge(try store.profiles(ids: fromPrimary)) { _, primary in primary }
        return rows
    }

    /// A position of the primary taken after `began`, shared with the other reads of this
    /// process that began before it was taken; `nil` when no standby may be read or the primary
    /// did not give one in time.
    private func standbyPosition(after began: ContinuousClock.Instant) -> LSN? {
        guard let standby, standby.hasUsableStandby else { return nil }
        let position = shared.primaryPositions.position(after: began, timeout: configuration.coalescedWait) {
            () throws(ProfileStoreError) -> LSN in
            statistics.record(.primaryPosition)
            return try store.walPosition()
        }
        if position == nil { statistics.record(.standbyUnavailable) }
        return position
    }
}
