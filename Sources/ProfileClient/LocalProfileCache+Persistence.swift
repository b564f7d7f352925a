import Foundation

/// The store on disk (``ProfileClientConfiguration/persistenceFile``): the confirmed profiles, most
/// recently used first, at most the store's capacity, and the edits not answered yet, in the order
/// made, as one JSON document written whole and atomically. A cold start reads it, so an app shows
/// the last known profiles at once and sends the edits made before it quit; every read of the
/// profiles still goes to the service, with `If-None-Match`, and is answered 304 when nothing changed.
struct ProfileStoreFile: Sendable {
    let url: URL

    /// A profile the file holds, with the entity tag the service sent with it (`nil` for one
    /// without, or a file written before tags were kept: it revalidates with its version's tag)
    /// and when the service last confirmed it (`nil` in a file written before that was kept).
    struct HeldProfile {
        var profile: Profile
        var tag: String?
        var confirmedAt: Date?
    }

    /// An edit the file holds (``LocalProfileCache/Intent``).
    struct HeldEdit: Codable, Equatable {
        var id: Int64
        var changes: ProfileChanges
        var base: Int32?
        var isExact: Bool
        var seen: [String: String?]
        /// The position, in the file's edits, of the edit whose pending version this one was made over.
        var over: Int?

        enum CodingKeys: String, CodingKey { case id, members, base, exact, seen, over }

        init(id: Int64, changes: ProfileChanges, base: Int32?, isExact: Bool, seen: [String: String?], over: Int?) {
            (self.id, self.changes, self.base, self.isExact, self.seen, self.over) = (id, changes, base, isExact, seen, over)
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(Int64.self, forKey: .id)
            changes = ProfileChanges(members: try container.decode([String: String?].self, forKey: .members))
            base = try container.decodeIfPresent(Int32.self, forKey: .base)
            isExact = try container.decode(Bool.self, forKey: .exact)
            seen = try container.decode([String: String?].self, forKey: .seen)
            over = try container.decodeIfPresent(Int.self, forKey: .over)
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(changes.members, forKey: .members)
            try container.encodeIfPresent(base, forKey: .base)
            try container.encode(isExact, forKey: .exact)
            try container.encode(seen, forKey: .seen)
            try container.encodeIfPresent(over, forKey: .over)
        }
    }

    /// The profiles the file holds, most recently used first; none when it is missing,
    /// unreadable, larger than `maximumBytes` or of another format (the store then starts empty,
    /// as without a file).
    func load(maximumBytes: Int) -> [Profile] {
        loadStore(maximumBytes: maximumBytes).profiles.map(\.profile)
    }

    /// Everything the file holds: the profiles, most recently used first, and the edits, in the
    /// order made.
    func loadStore(maximumBytes: Int) -> (profiles: [HeldProfile], edits: [HeldEdit]) {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path),
            let size = attributes[.size] as? Int, size <= maximumBytes,
            let data = try? Data(contentsOf: url),
            let document = try? JSONDecoder().decode(Document.self, from: data), document.format == Document.currentFormat
        else { return ([], []) }
        let profiles = document.profiles.map { profile in
            HeldProfile(
                profile: profile, tag: document.tags?[String(profile.id)],
                confirmedAt: document.confirmedAt?[String(profile.id)].map { Date(timeIntervalSince1970: $0) })
        }
        return (profiles, document.edits ?? [])
    }

    /// - Parameters:
    ///   - tags: the entity tag of each profile that has one, by id.
    ///   - confirmedAt: when the service last confirmed each profile, by id.
    ///   - edits: the edits not answered yet, in the order made.
    func save(_ profiles: [Profile], tags: [Int64: String] = [:], confirmedAt: [Int64: Date] = [:], edits: [HeldEdit] = []) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let document = Document(
            format: Document.currentFormat, profiles: profiles,
            tags: tags.isEmpty ? nil : Dictionary(uniqueKeysWithValues: tags.map { (String($0.key), $0.value) }),
            confirmedAt: confirmedAt.isEmpty
                ? nil : Dictionary(uniqueKeysWithValues: confirmedAt.map { (String($0.key), $0.value.timeIntervalSince1970) }),
            edits: edits.isEmpty ? nil : edits)
        try JSONEncoder().encode(document).write(to: url, options: .atomic)
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }

    /// Format 1 still: `tags`, `confirmedAt` and `edits` are optional, so a file of any version
    /// reads in the others (an older client ignores them; its files have none).
    private struct Document: Codable {
        static let currentFormat = 1
        var format: Int
        var profiles: [Profile]
        /// The entity tags by id (a string: a JSON object's keys are).
        var tags: [String: String]?
        /// When the service last confirmed each profile, in seconds since 1970, by id.
        var confirmedAt: [String: Double]?
        /// The edits not answered yet, in the order made.
        var edits: [HeldEdit]?
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
            record.confirmed != nil && isPersisted(id)
        }.sorted { $0.value.lastUse > $1.value.lastUse }.prefix(capacity)
        let tags = kept.compactMap { id, record in record.confirmedTag.map { (id, $0) } }
        let confirmedAt = kept.compactMap { id, record in record.confirmedAt.map { (id, $0) } }
        var positions: [UInt64: Int] = [:]
        var edits: [ProfileStoreFile.HeldEdit] = []
        for (id, sequence) in outbox where isPersisted(id) {
            guard let intent = records[id]?.intents.first(where: { $0.sequence == sequence }) else { continue }
            positions[sequence] = edits.count
            edits.append(
                ProfileStoreFile.HeldEdit(
                    id: id, changes: intent.changes, base: intent.base, isExact: intent.isExact, seen: intent.seen,
                    over: intent.madeOver.flatMap { positions[$0] }))
        }
        try file.save(
            kept.compactMap(\.value.confirmed), tags: Dictionary(uniqueKeysWithValues: tags),
            confirmedAt: Dictionary(uniqueKeysWithValues: confirmedAt), edits: edits)
        hasUnsavedChanges = false
    }

    /// Whether what the store holds of `id` may be written to disk: not an owner's view (its
    /// profile, nor its edits, which may set fields only the owner reads), unless the app opted in.
    private func isPersisted(_ id: Int64) -> Bool {
        persistsPrivateProfiles || !ownerViewIDs.contains(id)
    }

    /// The service answered these ids in their owner's view: from now on they stay off the disk
    /// (unless the app opted in), and the file is written again without them.
    func didReceiveOwnerViews(of ids: [Int64]) {
        guard !persistsPrivateProfiles else { return }
        for id in ids where ownerViewIDs.insert(id).inserted { hasUnsavedChanges = true }
    }

    /// Forgets everything of the session that ends (a user logged out) — records, floors,
    /// read-your-writes entries, queued edits and what observers start with — and removes
    /// `file`. What requests begun before bring back is dropped: a read's answer, an edit's
    /// (whose caller still gets it), a stream's events; edits waiting for their turn fail with
    /// ``ProfileClientError/cancelled``.
    func clear(removing file: ProfileStoreFile?) {
        unreadFile = nil  // what it holds is cleared too
        generation += 1
        clearedThrough = nextSequence
        let sending = Set(records.values.flatMap { $0.intents.filter(\.isSending).map(\.sequence) })
        records = [:]
        ownerViewIDs = []
        outbox = []
        let waiting = editCallers.filter { !sending.contains($0.key) }.flatMap(\.value.values)
        editCallers = editCallers.filter { sending.contains($0.key) }
        confirmedSinceRestore = []
        metadata.removeAll()
        hasUnsavedChanges = false
        observers.forgetAll()
        file?.remove()
        for caller in waiting { caller.resume(returning: .failure(.cancelled)) }
    }
}
