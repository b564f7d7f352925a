/// What the store knows of usernames: a lookup by username (``ProfileClient/fetch(username:policy:)``)
/// learns the id only from its answer, so these find the id the client already knows holds a
/// username, by its handle (``ProfileClient/handle(of:)``).
extension LocalProfileCache {
    /// The profile this client wrote whose username has `handle`, while its window lasts and
    /// nothing newer is known of its id.
    func writtenProfile(handle: String) -> Profile? {
        guard
            let id = records.first(where: { _, record in
                record.written.map { ProfileClient.handle(of: $0.profile.username) == handle } == true
            })?.key
        else { return nil }
        return writtenProfile(id: id)
    }

    /// The id whose newest confirmed profile has a username of `handle` (the most recently used,
    /// should the store hold two: one of them renamed since).
    func id(holding handle: String) -> Int64? {
        records.filter { _, record in record.confirmed.map { ProfileClient.handle(of: $0.username) == handle } == true }
            .max { $0.value.lastUse < $1.value.lastUse }?.key
    }

    /// Whether `profile` is older than a version of its id the client knows: below the id's
    /// floor, or not above its deletion.
    func isBelowFloor(_ profile: Profile) -> Bool {
        guard let record = records[profile.id] else { return false }
        return profile.version < record.floor || record.deletedAbove.map { profile.version <= $0 } == true
    }
}
