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
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path),
            let size = attributes[.size] as? Int, size <= maximumBytes,
            let data = try? Data(contentsOf: url),
            let document = try? JSONDecoder().decode(Document.self, from: data), document.format == Document.currentFormat
        else { return [] }
        return document.profiles
    }

    func save(_ profiles: [Profile]) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let data = try JSONEncoder().encode(Document(format: Document.currentFormat, profiles: profiles))
        try data.write(to: url, options: .atomic)
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }

    private struct Document: Codable {
        static let currentFormat = 1
        var format: Int
        var profiles: [Profile]
    }
}

extension LocalProfileCache {
    /// Writes the confirmed profiles to `file` when they changed since the last write: most
    /// recently used first, at most `capacity`. Changes stay unsaved until a write succeeds, so a
    /// failed one is tried again by the next. On the actor, so that a ``clear(removing:)`` is
    /// never followed by a write of what it cleared.
    func save(to file: ProfileStoreFile) throws {
        guard hasUnsavedChanges else { return }
        let kept = records.values.sorted { $0.lastUse > $1.lastUse }.compactMap(\.confirmed)
            .filter { persistsPrivateProfiles || !ownerViewIDs.contains($0.id) }
        try file.save(kept.prefix(capacity).map { $0 })
        hasUnsavedChanges = false
    }

    /// The service answered these ids in their owner's view: from now on they stay off the disk
    /// (unless the app opted in), and the file is written again without them.
    func didReceiveOwnerViews(of ids: [Int64]) {
        guard !persistsPrivateProfiles else { return }
        for id in ids where ownerViewIDs.insert(id).inserted { hasUnsavedChanges = true }
    }

    /// Whether the profile of `id` the client holds is its owner's view.
    func holdsOwnerView(of id: Int64) -> Bool { ownerViewIDs.contains(id) }

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
