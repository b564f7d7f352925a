import Foundation

/// The store on disk (``ProfileClientConfiguration/persistenceFile``): the confirmed profiles, most
/// recently used first, at most the store's capacity, as one JSON document written whole and
/// atomically. A cold start reads it, so an app shows the last known profiles at once; every read
/// of them still goes to the service, with `If-None-Match`, and is answered 304 when nothing changed.
struct ProfileStoreFile: Sendable {
    let url: URL

    /// The profiles the file holds, most recently used first; none when it is missing,
    /// unreadable, larger than `maximumBytes` or of another format (the store then starts empty,
    /// as without a file).
    func load(maximumBytes: Int) -> [Profile] {
        loadTagged(maximumBytes: maximumBytes).map(\.profile)
    }

    /// ``load(maximumBytes:)`` with the entity tag the service sent with each profile; `nil` for
    /// one without (a file written before tags were kept: its profiles revalidate with their
    /// version's tag).
    func loadTagged(maximumBytes: Int) -> [(profile: Profile, tag: String?)] {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path),
            let size = attributes[.size] as? Int, size <= maximumBytes,
            let data = try? Data(contentsOf: url),
            let document = try? JSONDecoder().decode(Document.self, from: data), document.format == Document.currentFormat
        else { return [] }
        return document.profiles.map { ($0, document.tags?[String($0.id)]) }
    }

    /// - Parameter tags: the entity tag of each profile that has one, by id.
    func save(_ profiles: [Profile], tags: [Int64: String] = [:]) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let document = Document(
            format: Document.currentFormat, profiles: profiles,
            tags: tags.isEmpty ? nil : Dictionary(uniqueKeysWithValues: tags.map { (String($0.key), $0.value) }))
        try JSONEncoder().encode(document).write(to: url, options: .atomic)
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }

    /// Format 1 still: `tags` is optional, so a file of either version reads in the other (an
    /// older client ignores it; its files have none).
    private struct Document: Codable {
        static let currentFormat = 1
        var format: Int
        var profiles: [Profile]
        /// The entity tags by id (a string: a JSON object's keys are).
        var tags: [String: String]?
    }
}

extension LocalProfileCache {
    /// Writes the confirmed profiles to `file` when they changed since the last write: most
    /// recently used first, at most `capacity`. Changes stay unsaved until a write succeeds, so a
    /// failed one is tried again by the next. On the actor, so that a ``clear(removing:)`` is
    /// never followed by a write of what it cleared.
    func save(to file: ProfileStoreFile) throws {
        guard hasUnsavedChanges else { return }
        let kept = records.filter { id, record in
            record.confirmed != nil && (persistsPrivateProfiles || !ownerViewIDs.contains(id))
        }.sorted { $0.value.lastUse > $1.value.lastUse }.prefix(capacity)
        let tags = kept.compactMap { id, record in record.confirmedTag.map { (id, $0) } }
        try file.save(kept.compactMap(\.value.confirmed), tags: Dictionary(uniqueKeysWithValues: tags))
        hasUnsavedChanges = false
    }

    /// The service answered these ids in their owner's view: from now on they stay off the disk
    /// (unless the app opted in), and the file is written again without them.
    func didReceiveOwnerViews(of ids: [Int64]) {
        guard !persistsPrivateProfiles else { return }
        for id in ids where ownerViewIDs.insert(id).inserted { hasUnsavedChanges = true }
    }

    /// Forgets everything of the session that ends (a user logged out) — records, floors,
    /// read-your-writes entries, pending edits and what observers start with — and removes
    /// `file`. What requests begun before bring back is dropped: a read's answer, an edit's
    /// (whose caller still gets it), a stream's events; edits waiting for their turn fail with
    /// ``ProfileClientError/cancelled``.
    func clear(removing file: ProfileStoreFile?) {
        unreadFile = nil  // what it holds is cleared too
        generation += 1
        clearedThrough = nextSequence
        records = [:]
        ownerViewIDs = []
        let waiting = lanes.values.flatMap { lane in
            lane.followersOfSending + (lane.next.map { $0.followers + [$0.turn] } ?? [])
        }
        lanes = [:]
        hasUnsavedChanges = false
        observers.forgetAll()
        file?.remove()
        for caller in waiting { caller.resume(returning: .done(.failure(.cancelled))) }
    }
}
