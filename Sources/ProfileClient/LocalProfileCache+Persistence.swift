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
        try file.save(records.values.sorted { $0.lastUse > $1.lastUse }.compactMap(\.confirmed).prefix(capacity).map { $0 })
        hasUnsavedChanges = false
    }

    /// Forgets every profile (a user logged out) — records, floors and read-your-writes entries;
    /// edits in flight finish as they would — and removes `file`.
    func clear(removing file: ProfileStoreFile?) {
        unreadFile = nil  // what it holds is cleared too
        records = records.filter { id, _ in lanes[id] != nil }.mapValues { record in
            var kept = Record()
            kept.intents = record.intents
            return kept
        }
        hasUnsavedChanges = false
        file?.remove()
    }
}
