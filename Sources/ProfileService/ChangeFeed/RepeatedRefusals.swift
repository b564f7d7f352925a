import PostgresClient

/// Counts the stream's refusals at one position: a refusal that repeats where the slot stands is
/// not going to go away by itself (docs/design.md §3.7).
struct RepeatedRefusals {
    /// Refusals in a row at one position that make a gap.
    static let limit = 3
    private(set) var position: LSN?
    private(set) var count = 0

    /// Records a refusal at `position`; true once it is the ``limit``-th in a row there.
    mutating func record(at position: LSN) -> Bool {
        if position == self.position {
            count += 1
        } else {
            self.position = position
            count = 1
        }
        return count >= Self.limit
    }

    mutating func reset() {
        position = nil
        count = 0
    }
}

extension PostgresError {
    /// The server answered and refused (it did not merely go away): a SQLSTATE outside the
    /// classes of a lost connection (08), an operator's shutdown (57), a lack of resources (53),
    /// and not "the slot is in use" (55006).
    var isRefusal: Bool {
        guard let state = sqlState else { return false }
        return !["08", "57", "53"].contains(state.errorClass) && state != .objectInUse
    }
}
