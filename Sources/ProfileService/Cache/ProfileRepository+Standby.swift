import PostgresClient

/// Where the rows of misses come from (docs/design.md §8): a standby, when it proves it has
/// replayed a position of the primary taken after the read began and its row meets the read's
/// floor; the primary otherwise. Writes, refreshes and the live updates' reads stay on the primary.
extension ProfileRepository {
    /// The rows of `ids` that exist, as of a moment after `began`: from a standby when one may
    /// answer, except the members whose floor its rows do not meet, which the primary reads. One
    /// id is one prepared single-row read; several, one query.
    func readRows(ids: [Int64], floors: [Int64: Int32], after began: ContinuousClock.Instant) throws(ProfileStoreError)
        -> [Int64: Profile]
    {
        var rows: [Int64: Profile] = [:]
        var fromPrimary = ids
        if let standby, let position = standbyPosition(after: began) {
            let answer: StandbyAnswer<[Int64: Profile]>
            if ids.count == 1 {
                switch standby.profile(id: ids[0], replayedThrough: position) {
                case .read(let row): answer = .read(row.map { [ids[0]: $0] } ?? [:])
                case .behind: answer = .behind
                case .unavailable: answer = .unavailable
                }
            } else {
                answer = standby.profiles(ids: ids, replayedThrough: position)
            }
            switch answer {
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
        if fromPrimary.count == 1 {
            if let row = try store.profile(id: fromPrimary[0]) { rows[row.id] = row }
        } else {
            statistics.record(.databaseBatchRead)
            rows.merge(try store.profiles(ids: fromPrimary)) { _, primary in primary }
        }
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
