extension ProfileClient {
    /// Sets the display name, however fast the user edits: what an app calls for each edit.
    ///
    /// Observers of `id` see the edit at once. The client sends one edit of an id at a time: an
    /// edit made while another is in flight waits, and only the newest waiting one is sent,
    /// expecting the version the previous one wrote — so the client's own writes never conflict
    /// with each other and the last edit wins. Callers whose edits were passed over get the answer
    /// of the one that carried them. When the client knows no version of the profile it reads it
    /// first, and shows the edit over the version read.
    ///
    /// The edit is shown over the version the user saw, as ``ProfileEvent/pending(_:)``, while that
    /// is the newest confirmed version: a change from another device that arrives meanwhile is
    /// shown at once (and the edit, made over an older version, then meets a 409 rather than
    /// overwrite it). A 409 shows the service's profile and fails the edits waiting behind it with
    /// the same error; any other failure rolls back only the failed edit, and the one waiting is
    /// sent next. Cancelling the caller does not cancel the edit.
    /// - Returns: the profile the service stored.
    /// - Throws: ``ProfileClientError``: `conflict(current:)`, `notFound`, `unauthorized`, `validation`…
    public func setDisplayName(_ displayName: String, id: Int64) async throws(ProfileClientError) -> Profile {
        let (sequence, turn) = await cache.beginEdit(id: id, displayName: displayName)
        let known: Int32?
        switch turn {
        case .done(let result): return try result.get()
        case .send(let expectedVersion): known = expectedVersion
        }
        // The user made the edit: a caller that goes away (a view dismissed) does not cancel it,
        // nor, through a rollback, the edits waiting behind it.
        let result = await Task { [self] () -> Result<Profile, ProfileClientError> in
            do throws(ProfileClientError) {
                let expected: Int32
                if let known { expected = known } else { expected = try await fetch(id: id, policy: .reloadFromServer).version }
                return .success(try await putDisplayName(displayName, id: id, expectedVersion: expected))
            } catch {
                return .failure(error)
            }
        }.value
        return try await cache.finishEdit(id: id, sequence: sequence, result: result).get()
    }

    /// Sets the display name if the profile is still at `expectedVersion`.
    ///
    /// Observers of `id` see the intended profile at once, pending, while `expectedVersion` is the
    /// newest confirmed version, then the service's answer; on 409 the service's current profile; on any other failure the
    /// newest confirmed one. Unlike ``setDisplayName(_:id:)`` these calls are not serialized: two
    /// made before the first answers conflict with each other.
    /// - Returns: the profile the service stored, at `expectedVersion + 1`.
    /// - Throws: ``ProfileClientError/conflict(current:)`` when the version is stale; never retried.
    public func updateDisplayName(id: Int64, to displayName: String, expectedVersion: Int32)
        async throws(ProfileClientError) -> Profile
    {
        try await showingPending(displayName, id: id, base: expectedVersion) { () async throws(ProfileClientError) in
            try await putDisplayName(displayName, id: id, expectedVersion: expectedVersion)
        }
    }

    /// Sets the display name with a patch (`PATCH`, JSON Merge Patch): at whatever version the
    /// service holds — no conflict, the later of two edits wins — or, with `expectedVersion`,
    /// only at that version (``ProfileClientError/conflict(current:)`` otherwise). Shown pending
    /// until answered, as ``updateDisplayName(id:to:expectedVersion:)``.
    public func patchDisplayName(id: Int64, to displayName: String, expectedVersion: Int32? = nil)
        async throws(ProfileClientError) -> Profile
    {
        try await patch(id: id, displayName: displayName, fields: [:], expectedVersion: expectedVersion)
    }

    /// Sets the profile fields named (`bio`, `avatar_url`, … : a `nil` value unsets the field)
    /// and leaves every other one as it is, with a patch: at whatever version the service holds —
    /// two devices setting different fields both land, neither conflicts — or, with
    /// `expectedVersion`, only at that version (``ProfileClientError/conflict(current:)``
    /// otherwise). Observers see the fields at once, pending, then the service's answer; a field
    /// the service does not declare is ``ProfileClientError/validation(field:detail:)`` naming it.
    ///
    /// Without a version the patch is shown over whichever version is confirmed (the service
    /// applies it over whichever it holds), and stays shown until its answer; for an id the client
    /// holds no version of, from the first version it learns (a read, a list, an event).
    public func setFields(_ fields: [String: String?], id: Int64, expectedVersion: Int32? = nil)
        async throws(ProfileClientError) -> Profile
    {
        try await patch(id: id, displayName: nil, fields: fields, expectedVersion: expectedVersion)
    }

    /// Sets the display name and the username (each when given) and the fields named, with one
    /// patch: as ``setFields(_:id:expectedVersion:)``.
    ///
    /// A new `username` renames the profile: observers see the new username at once, pending. The
    /// old one stays reserved for the profile for a while (lookups of it find the profile under
    /// the new one), so it may take it back. A username another profile holds, or holds in
    /// reserve, is refused with ``ProfileClientError/usernameTaken`` and the old one is shown
    /// again; one that is not 3 to 32 of `A-Z a-z 0-9 _ .` with
    /// ``ProfileClientError/validation(field:detail:)`` on `username`.
    ///
    /// ```swift
    /// let renamed = try await client.patch(id: 42, username: "ada_l")
    /// ```
    public func patch(
        id: Int64, displayName: String? = nil, username: String? = nil, fields: [String: String?] = [:],
        expectedVersion: Int32? = nil
    ) async throws(ProfileClientError) -> Profile {
        let floats = expectedVersion == nil
        return try await showingPending(
            displayName, username: username, fields: fields, id: id, base: expectedVersion, floats: floats
        ) { () async throws(ProfileClientError) in
            var members = fields
            if let displayName { members["display_name"] = displayName }
            if let username { members["username"] = username }
            let body = try Self.encode(patch: members)
            var headers = ["Content-Type": "application/merge-patch+json"]
            if let expectedVersion { headers["If-Match"] = "\"\(expectedVersion)\"" }
            let response = try await send(method: "PATCH", path: "/users/profile/\(id)", body: body, isRead: false, headers: headers)
            guard response.status == 200 else { throw Self.error(for: response) }
            return try Self.decodeProfile(response.body)
        }
    }

    /// Shows the edit pending over version `base` (with `floats`, over whichever is confirmed)
    /// while `write` runs, then what the service answered: the written profile, a 409's current
    /// one, or on any other failure the newest confirmed one.
    private func showingPending(
        _ displayName: String?, username: String? = nil, fields: [String: String?] = [:], id: Int64, base: Int32?,
        floats: Bool = false, _ write: () async throws(ProfileClientError) -> Profile
    ) async throws(ProfileClientError) -> Profile {
        let sequence = await cache.beginUpdate(
            id: id, displayName: displayName, username: username, fields: fields, base: base, floats: floats)
        do throws(ProfileClientError) {
            let profile = try await write()
            await cache.finishUpdate(id: id, sequence: sequence, outcome: .written(profile))
            return profile
        } catch {
            if case .conflict(let current) = error {
                await cache.finishUpdate(id: id, sequence: sequence, outcome: .conflict(current: current))
            } else {
                await cache.finishUpdate(id: id, sequence: sequence, outcome: .failed)
            }
            throw error
        }
    }

    /// `PUT /users/profile/{id}` of the display name at `expectedVersion`; the answer is not yet
    /// in the store.
    private func putDisplayName(_ displayName: String, id: Int64, expectedVersion: Int32)
        async throws(ProfileClientError) -> Profile
    {
        let body = try Self.encode(["display_name": displayName], version: expectedVersion)
        let response = try await send(method: "PUT", path: "/users/profile/\(id)", body: body, isRead: false)
        guard response.status == 200 else { throw Self.error(for: response) }
        return try Self.decodeProfile(response.body)
    }
}
