import Foundation

/// A client of profile-service that gives its callers read-your-writes, optimistic updates and
/// live updates, with a screen that never goes back to an older version.
///
/// - **Read-your-writes.** A profile this client wrote answers ``fetch(id:policy:)`` of its id
///   for ``ProfileClientConfiguration/readYourWritesWindow`` without a network call. Every version
///   the client learns (a read, a list, a write, a 409, an event) becomes the id's floor: later
///   reads pass it as `min_version`, and return the newer of the answer and what the client holds.
/// - **Edits.** ``edit(id:_:expectedVersion:)`` shows the edit at once and sends edits one at a
///   time, in the order made, joining those made while one waits, so rapid edits never conflict
///   with each other and the last one wins. An optimistic value is shown only over the version it
///   was made on; a refusal rolls back to the newest confirmed profile. Offline, edits are kept
///   (persisted with the store) and sent when the network is back.
/// - **Observation.** ``events(for:)`` says what happens to a profile (updated, deleted, following
///   failed or resumed), ``updates(for:)`` gives its profiles, ``observeList(ids:)`` a live list,
///   and ``ObservableProfiles`` is the same for SwiftUI. While an id is observed, the client
///   follows its event stream (`/users/profile/{id}/events`), reconnecting with backoff
///   (``LiveUpdatePolicy``) and `Last-Event-ID`. Share one instance across the app (inject it);
///   there is no global one.
/// - **Retries.** Reads retry on 503, 504 and connection errors with jittered backoff, honouring
///   `Retry-After`; writes only when the request surely never reached the service. A 401 is
///   retried once with a fresh token.
///
/// ```swift
/// let client = ProfileClient(configuration: .init(baseURL: URL(string: "http://127.0.0.1:8080")!))
/// let profile = try await client.fetch(id: 42)
/// let renamed = try await client.edit(id: 42, ProfileChanges(displayName: "Ada"))
/// ```
public final class ProfileClient: Sendable {
    public let configuration: ProfileClientConfiguration
    let transport: any HTTPTransport
    let cache: LocalProfileCache
    let observers: ProfileObservers
    let listObservers: ProfileListObservers
    let randomUnit: @Sendable () -> Double
    let sleep: @Sendable (Duration) async throws -> Void
    /// Opens event streams; `nil` (in unit tests) follows none.
    let eventTransport: (any EventStreamTransport)?
    /// The streams of every id observed one by one (``events(for:)``, ``updates(for:)``,
    /// ``ObservableProfiles``); `nil` when the client follows none.
    let followedStreams: FollowedStreams?
    let liveSubscriptions = LiveSubscriptions()
    let inFlightReads = InFlightReads()
    /// The streams asleep in backoff after a network failure, woken when the network is back.
    let networkWakeUps = NetworkWakeUps()
    /// What ``clear()`` empties beside the store: every ``ObservableProfiles`` of the client.
    let storeClears = ClearHandlers()
    /// The bearer tokens, with one refresh at a time of a refused one.
    let tokens: BearerTokens
    /// The store's file and the task that writes it, when ``ProfileClientConfiguration/persistenceFile`` is set.
    let storeFile: ProfileStoreFile?
    private let storeWriter = LockedValue<Task<Void, Never>?>(nil)

    /// - Parameter configuration: the service's URL, the read-your-writes window, retries, token.
    public convenience init(configuration: ProfileClientConfiguration) {
        self.init(
            configuration: configuration, transport: URLSessionTransport(),
            eventTransport: URLSessionEventStreamTransport())
    }

    /// A client that sends through transports of the app's: ``URLSessionTransport`` over its own
    /// `URLSession` (shared, pinned, with a User-Agent), or ``InMemoryProfileService`` for unit
    /// tests and SwiftUI previews.
    /// - Parameters:
    ///   - transport: sends every request.
    ///   - eventTransport: opens the live updates' event streams; `nil` follows none (observers
    ///     then see only what this client reads and writes).
    public convenience init(
        configuration: ProfileClientConfiguration, transport: any HTTPTransport,
        eventTransport: (any EventStreamTransport)?
    ) {
        self.init(
            configuration: configuration, transport: transport, eventTransport: eventTransport,
            now: { ContinuousClock.now })
    }

    init(
        configuration: ProfileClientConfiguration, transport: any HTTPTransport,
        eventTransport: (any EventStreamTransport)? = nil,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
        randomUnit: @escaping @Sendable () -> Double = { Double.random(in: 0...1) },
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        settleDelay: Duration? = FollowedStreams.settleDelay
    ) {
        self.configuration = configuration
        self.transport = transport
        self.tokens = BearerTokens(configuration: configuration)
        self.observers = ProfileObservers()
        self.listObservers = ProfileListObservers()
        let storeFile = configuration.persistenceFile.map(ProfileStoreFile.init(url:))
        self.storeFile = storeFile
        // The file is read at the store's first use, on its actor: never here, on the caller's thread.
        self.cache = LocalProfileCache(
            window: configuration.readYourWritesWindow, capacity: configuration.storeCapacity, observers: observers,
            lists: listObservers, now: now, file: storeFile, persistsPrivateProfiles: configuration.persistsPrivateProfiles)
        self.randomUnit = randomUnit
        self.sleep = sleep
        self.eventTransport = eventTransport
        if let eventTransport, configuration.followsLiveUpdates {
            followedStreams = FollowedStreams(
                following: StreamFollowing(
                    transport: eventTransport, configuration: configuration, tokens: tokens, cache: cache,
                    randomUnit: randomUnit, sleep: sleep, wakeUps: networkWakeUps),
                observers: observers, subscriptions: liveSubscriptions, settleDelay: settleDelay)
        } else {
            followedStreams = nil
        }
        followedStreams?.fillAppeared { [weak self] ids in await self?.fill(appeared: ids) }
        cache.edits.set { [weak self] in self?.startEditSender() }
        if let storeFile {
            let (cache, interval) = (cache, configuration.persistenceInterval)
            storeWriter.withLock {
                $0 = Task {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: interval)
                        try? await cache.save(to: storeFile)
                    }
                }
            }
        }
    }

    deinit {
        storeWriter.withLock { $0?.cancel() }
        liveSubscriptions.cancelAll()
        observers.finishAll()
        listObservers.finishAll()
        cache.outcomes.finishAll()
    }

    /// Writes the store to ``ProfileClientConfiguration/persistenceFile`` now (when it changed):
    /// call it when the app leaves the foreground. Does nothing without a file.
    /// - Throws: the file system's error.
    public func saveStore() async throws {
        guard let storeFile else { return }
        try await cache.save(to: storeFile)
    }

    /// Forgets everything of the session that ends, on logout: every profile, floor and pending
    /// edit this client holds (queued edits are not sent), what new observers would start with,
    /// and the store's file.
    ///
    /// Nothing of the previous session comes back afterwards: the answers of requests in flight
    /// (a read, an edit — its caller still gets it) are not put into the store, nor written to
    /// disk, nor given to observers; edits waiting for their turn fail with
    /// ``ProfileClientError/cancelled``; the event streams followed are reopened, with the
    /// token the provider gives now. A new observer or ``ObservableProfiles`` starts empty;
    /// streams of observers and lists that were running keep what they were given, so drop them with the
    /// session's screens. Every ``ObservableProfiles`` of the client is emptied before this returns.
    public func clear() async {
        await cache.clear(removing: storeFile)
        liveSubscriptions.restart()
        await storeClears.run()
    }

    /// Where a read may be answered from.
    public enum FetchPolicy: Sendable, Hashable {
        /// A profile this client wrote within the window answers without a network call.
        case useLocalWrites
        /// Always ask the service (still passing the id's floor as `min_version`).
        case reloadFromServer
        /// The profile the store holds — one this client wrote, or the last the service confirmed
        /// (the persisted store's, after a launch) — without a network call; the service only when
        /// the store holds none. For screens that show what is known at once and follow changes.
        case cacheFirst
        /// Ask the service; when no answer comes (offline, no connection, no answer in time), the
        /// profile the store holds, if it holds one.
        case networkFirst
    }

    /// Reads a profile, never older than any version this client learned of it.
    ///
    /// The request carries the id's floor (`min_version`) and, when the client holds the profile,
    /// `If-None-Match` with the entity tag the service sent with it — the owner's view's (`"7"`)
    /// or everyone else's (`"7-public"`, while the service declares fields only owners read); its
    /// version's (`"7"`) when it came without one: a 304 answers from the store. A 404 reaches the
    /// id's observers as ``ProfileEvent/deleted(id:)``.
    /// - Returns: the newer of the service's answer and the profile the client holds.
    /// - Throws: ``ProfileClientError``: `notFound`, `unauthorized`, `forbidden`, `unavailable`, `transport`…
    public func fetch(id: Int64, policy: FetchPolicy = .useLocalWrites) async throws(ProfileClientError) -> Profile {
        if policy == .cacheFirst, let held = await cache.heldProfile(id: id) { return held }
        do {
            return try await fetchFromService(id: id, policy: policy)
        } catch where policy == .networkFirst && error.isNoAnswer {
            guard let held = await cache.heldProfile(id: id) else { throw error }
            return held
        }
    }

    private func fetchFromService(id: Int64, policy: FetchPolicy) async throws(ProfileClientError) -> Profile {
        let generation = await cache.generation
        if policy != .reloadFromServer, let written = await cache.writtenProfile(id: id) { return written }
        var path = "/users/profile/\(id)"
        if let floor = await cache.floor(id: id) { path += "?min_version=\(floor)" }
        // The tag held, never one made from the version alone: the owner's `"7"` would match
        // while the client holds the public view it restored from disk, and a 304 would then
        // answer without the owner's fields.
        let known = await cache.revalidation(id: id)
        let headers = known.map { ["If-None-Match": $0.tag] } ?? [:]
        let response = try await send(method: "GET", path: path, body: nil, isRead: true, headers: headers)
        switch response.status {
        case 200:
            let profile = try Self.decodeProfile(response.body)
            return await cache.didFetch(profile, tag: response.headers["etag"], since: generation)
        case 304 where known != nil:
            return await cache.didFetch(known!.profile, tag: response.headers["etag"], since: generation)
        case 404:
            await cache.didLearnMissing(id: id, since: generation)
            throw .notFound
        default: throw Self.error(for: response)
        }
    }

    /// Creates a profile (`If-None-Match: *`); 409 when the id exists (``ProfileClientError/conflict(current:)``)
    /// or the username is taken or reserved (``ProfileClientError/usernameTaken``).
    public func create(id: Int64, username: String, displayName: String) async throws(ProfileClientError) -> Profile {
        let body = try Self.encode(["username": username, "display_name": displayName])
        let generation = await cache.generation
        let response = try await send(
            method: "PUT", path: "/users/profile/\(id)", body: body, isRead: false, headers: ["If-None-Match": "*"])
        switch response.status {
        case 201, 200:
            let profile = try Self.decodeProfile(response.body)
            await cache.didWrite(profile, since: generation)
            return profile
        default:
            let error = Self.error(for: response)
            if case .conflict(let current) = error { await cache.didFetch(current, since: generation) }
            throw error
        }
    }

    /// Deletes profile `id` (its owner's token, or an administrator's); with `expectedVersion`,
    /// only that version (``ProfileClientError/conflict(current:)`` otherwise). Afterwards the
    /// client shows it deleted (``ProfileEvent/deleted``); a 404 means it was gone already
    /// (``ProfileClientError/notFound``), which the client shows the same way.
    public func delete(id: Int64, expectedVersion: Int32? = nil) async throws(ProfileClientError) {
        let headers = expectedVersion.map { ["If-Match": "\"\($0)\""] } ?? [:]
        let generation = await cache.generation
        let response = try await send(method: "DELETE", path: "/users/profile/\(id)", body: nil, isRead: false, headers: headers)
        switch response.status {
        case 204:
            await cache.didLearnMissing(id: id, since: generation)
        case 404:
            await cache.didLearnMissing(id: id, since: generation)
            throw .notFound
        default:
            let error = Self.error(for: response)
            if case .conflict(let current) = error { await cache.didFetch(current, since: generation) }
            throw error
        }
    }

    /// Every event of `id`: its state now (the latest profile the client knows, or `deleted`),
    /// then each change this client makes or learns of — fetches, writes, optimistic edits and
    /// their rollbacks, and every version committed anywhere (from the service's event stream,
    /// followed while anyone observes `id`) — and whether following fails or resumes.
    ///
    /// A version older than one shown is never shown after it. Consecutive equal states are given
    /// once; a slow consumer keeps the newest 64 events. A profile deleted and created again comes
    /// back as `updated`. The stream ends when the consumer's task is cancelled or the client is
    /// released; after ``ProfileEvent/failed(_:willRetry:)`` without retry, following has stopped
    /// (observing again starts it anew).
    public func events(for id: Int64) -> AsyncStream<ProfileEvent> {
        let stream = observers.events(for: id) { [followedStreams] in followedStreams?.letGo(id) }
        restoreStore()
        followedStreams?.follow(id)
        return stream
    }

    /// The profiles of ``events(for:)``: every version of `id` the client shows, starting with the
    /// latest it knows. (Deletions and the state of following are in ``events(for:)`` only.)
    public func updates(for id: Int64) -> AsyncStream<Profile> {
        let stream = observers.profiles(for: id) { [followedStreams] in followedStreams?.letGo(id) }
        restoreStore()
        followedStreams?.follow(id)
        return stream
    }

    /// Reads the store's file, if not read yet, in the background: an observer gets the profiles
    /// it holds without waiting for a first read or write.
    func restoreStore() {
        guard storeFile != nil else { return }
        Task { [cache] in await cache.restoreIfNeeded() }
    }
}
