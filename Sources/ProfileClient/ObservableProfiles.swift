public import Foundation
public import Observation

/// The profiles of one ``ProfileClient`` as an `@Observable` store that SwiftUI views read
/// synchronously: a view that reads ``profile(_:)`` is redrawn when that profile changes — and
/// not when another one does.
///
/// ```swift
/// struct ProfileName: View {
///     let id: Int64
///     @Environment(ObservableProfiles.self) private var profiles
///
///     var body: some View {
///         Text(profiles.profile(id)?.displayName ?? "…")
///             .task(id: id) { await profiles.follow(id) }  // live while the view is on screen
///     }
/// }
/// ```
///
/// An id is live while a ``follow(_:)`` of it runs (the client then follows its event stream).
/// The store keeps what it learned of ids nobody follows any more for the next screen that
/// shows them, up to `capacity` of them, forgetting the least recently used first.
@available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
@MainActor
@Observable
public final class ObservableProfiles {
    /// What the store knows of one id.
    public struct Entry: Sendable, Hashable {
        /// The profile as the client shows it (optimistic edits included); `nil` while unknown or
        /// deleted.
        public var profile: Profile?
        /// ``profile`` is an edit of this client the service has not confirmed yet.
        public var isPending = false
        /// The service says no profile has the id.
        public var isDeleted = false
        /// The last failure of following the id or of reading it; cleared when it resumes.
        public var failure: ProfileClientError?
        /// ``profile`` came from the persisted store and the service has not confirmed it since
        /// the client started (offline, or not read yet).
        public var isFromStore = false
        /// When the service last confirmed the profile (a read, a list, a write, an event), as of
        /// the entry's last change (``ProfileClient/entry(id:)`` says it now); `nil` when unknown.
        public var confirmedAt: Date?
        /// Edits of the id wait to be sent or answered (offline, they wait for the network).
        public var hasPendingEdits = false
    }

    /// One box per id, each observed on its own: a view that reads one id is redrawn when that
    /// id changes, not when another does. A view that reads an id nothing is known of gets an
    /// empty box to watch, so it hears of the id's first value.
    @ObservationIgnored private var entries: [Int64: ObservedEntry] = [:]
    @ObservationIgnored private let client: ProfileClient
    @ObservationIgnored private let capacity: Int
    /// How many ``follow(_:)`` calls run per id.
    @ObservationIgnored private var followers: [Int64: Int] = [:]
    /// When each id was last followed (a counter), for eviction.
    @ObservationIgnored private var lastUse: [Int64: UInt64] = [:]
    /// The ids with an entry that nobody follows: what eviction may forget, kept as follows start
    /// and end, so that a row going away costs no scan of every entry.
    @ObservationIgnored private var idle: Set<Int64> = []
    /// How many times eviction sorted the idle ids (for tests of the cost).
    @ObservationIgnored private(set) var evictionPasses = 0
    @ObservationIgnored private var useCounter: UInt64 = 0

    /// - Parameters:
    ///   - client: the app's one client; its store and streams are shared with every other use.
    ///   - capacity: how many ids nobody follows are kept (least recently used are forgotten).
    public init(client: ProfileClient, capacity: Int = 200) {
        self.client = client
        self.capacity = max(0, capacity)
        clearing = client.storeClears.add { [weak self] in await self?.forgetAll() }
    }

    /// Its entry in the client's ``ProfileClient/clear()`` handlers.
    @ObservationIgnored private var clearing: UInt64 = 0

    deinit {
        client.storeClears.remove(clearing)
    }

    /// The client was cleared (a logout): every entry is emptied, and a view watching one is
    /// redrawn.
    private func forgetAll() {
        for box in entries.values where box.entry != nil { box.entry = nil }
    }

    /// The profile of `id` as known now; `nil` while unknown or deleted.
    public func profile(_ id: Int64) -> Profile? {
        observed(id).entry?.profile
    }

    /// Everything the store knows of `id` now; `nil` when it knows nothing.
    public func entry(_ id: Int64) -> Entry? {
        observed(id).entry
    }

    /// The box of `id`, made empty when there is none.
    private func observed(_ id: Int64) -> ObservedEntry {
        if let box = entries[id] { return box }
        let box = ObservedEntry()
        entries[id] = box
        if followers[id] == nil { idle.insert(id) }
        return box
    }

    /// Keeps `id` live until the calling task is cancelled (SwiftUI's `.task` cancels it when the
    /// view goes), applying each ``ProfileEvent`` to the store.
    ///
    /// Every id followed shares the client's event streams (`/users/profiles/events`, up to 1,000
    /// ids each) with every other use of the client: rows that appear together get one stream,
    /// opened with each id's floor, and streams whose rows stay are never reconnected — so a list
    /// of hundreds of rows, scrolled, costs no connection and no read per row. Rows that appear
    /// show what the store holds at once; those it holds nothing of are read together, with one
    /// list request per 100 ids. A client that follows no streams
    /// (``ProfileClientConfiguration/followsLiveUpdates`` off, or no event transport) reads each
    /// followed id instead.
    public func follow(_ id: Int64) async {
        followers[id, default: 0] += 1
        idle.remove(id)
        useCounter += 1
        lastUse[id] = useCounter
        defer {
            followers[id, default: 1] -= 1
            if followers[id] == 0 {
                followers[id] = nil
                if entries[id] != nil { idle.insert(id) }
            }
            evictIfFull()
        }
        if let streams = client.followedStreams {
            let events = client.storeEvents(for: id)
            streams.follow(id)
            defer { streams.letGo(id) }
            for await event in events { apply(event, to: id) }
            return
        }
        let events = client.events(for: id)
        let reader = Task { [client] in
            do throws(ProfileClientError) {
                _ = try await client.fetch(id: id)  // its answer arrives through the events
            } catch .notFound {
                // Arrives through the events as `deleted`.
            } catch .cancelled {
                // The view went away: nothing failed.
            } catch {
                self.apply(.failed(error, willRetry: false), to: id)
            }
        }
        defer { reader.cancel() }
        for await event in events { apply(event, to: id) }
    }

    /// Applies one event of `id`'s stream.
    func apply(_ event: ProfileEvent, to id: Int64) {
        let box = observed(id)
        var entry = box.entry ?? Entry()
        switch event {
        case .updated(let profile), .pending(let profile):
            entry.profile = profile
            entry.isPending = event == .pending(profile)
            entry.isDeleted = false
            entry.failure = nil
        case .deleted:
            entry.profile = nil
            entry.isPending = false
            entry.isDeleted = true
        case .failed(.cancelled, _):
            break  // the caller went away: not a failure to show
        case .failed(let error, _):
            entry.failure = error
        case .resumed:
            entry.failure = nil
        }
        // Set by the store before it published the event.
        let metadata = client.cache.metadata[id]
        entry.isFromStore = metadata?.isFromStore ?? false
        entry.confirmedAt = metadata?.confirmedAt
        entry.hasPendingEdits = metadata?.hasPendingEdits ?? false
        if box.entry != entry { box.entry = entry }
    }

    /// Forgets the least recently used ids nobody follows beyond `capacity` of them, once a tenth
    /// more has gathered: closing a screen of n rows sorts the idle ids about n / (capacity / 10)
    /// times, not n times.
    private func evictIfFull() {
        guard idle.count > capacity + max(1, capacity / 10) else { return }
        evictionPasses += 1
        for id in idle.sorted(by: { lastUse[$0, default: 0] < lastUse[$1, default: 0] }).prefix(idle.count - capacity) {
            // Emptied before it goes: a view still watching it is redrawn and watches a new box.
            entries.removeValue(forKey: id)?.entry = nil
            lastUse[id] = nil
            idle.remove(id)
        }
    }
}

/// What ``ObservableProfiles`` knows of one id, observed on its own.
@available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
@MainActor
@Observable
final class ObservedEntry {
    var entry: ObservableProfiles.Entry?
}
