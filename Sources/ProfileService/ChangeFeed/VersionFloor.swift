import PostgresClient

/// The database-wide floor of new versions (migrations/0003, docs/design.md §3.7): after the
/// database went back in time, versions the lost history handed out must never be handed out
/// again for other content, and only a running instance knows that history existed.
enum VersionFloor {
    /// Versions one id may have been given in a lost history, at most: far more than any profile
    /// is written between a backup and its restore, and 2,048 restores fit in `version`'s range.
    static let margin: Int32 = 1 << 20

    /// Raises the floor above every version the restored database holds (rows and tombstones)
    /// plus ``margin`` — unless another instance raised it for this same restore, i.e. after
    /// `lastSeenAlive`, when this instance last saw the old database. Returns the floor.
    static let raise = PostgresStatement(
        name: "profile_version_floor_raise",
        sql: """
            WITH highest AS (
                SELECT greatest(
                    (SELECT coalesce(max(version), 0) FROM user_profiles),
                    (SELECT coalesce(max(version), 0) FROM user_profile_tombstones),
                    (SELECT floor FROM profile_version_floor)) AS version)
            UPDATE profile_version_floor
               SET floor = (SELECT version FROM highest) + $1::integer, raised_at = clock_timestamp()
             WHERE raised_at IS NULL OR raised_at < $2::timestamptz
            RETURNING floor
            """,
        isIdempotent: false)
}
