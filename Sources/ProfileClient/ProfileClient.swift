import Foundation

/// A client of profile-service that gives its callers read-your-writes, optimistic updates and
/// live updates.
///
/// - **Read-your-writes.** A profile this client wrote answers ``fetch(id:policy:)`` of its id
///   for ``ProfileClientConfiguration/readYourWritesWindow`` without a network call; later reads
///   pass `min_version` of the last write, so the service keeps the guarantee after that.
/// - **Optimistic updates.** ``updateDisplayName(id:to:expectedVersion:)`` shows the intended
///   profile to observers at once, then the service's answer, or a rollback.
/// - **Observation.** ``updates(for:)``: every fetch and write of an id through this instance
///   reaches every observer of it, and so does every change committed anywhere: while an id is
///   observed, the client follows its event stream (`/users/profile/{id}/events`), reconnecting
///   with jittered backoff and `Last-Event-ID`. ``observeList(ids:)`` follows one stream for a
///   whole list (`/users/profiles/events`) into the same store. Share one instance across the app
///   (inject it); there is no global one.
/// - **Retries.** Reads retry on 503, 504 and connection errors with jittered backoff, honouring
///   `Retry-After`; writes only when the request surely never reached the service.
///
/// ```swift
/// let client = ProfileClient(configuration: .init(baseURL: URL(string: "http://127.0.0.1:8080")!))
/// let profile = try await client.fetch(id: 42)
/// let renamed = try await client.updateDisplayName(id: 42, to: "Ada", expectedVersion: profile.version)
/// ```
public final class ProfileClient: Sendable {
    public let configuration: ProfileClientConfiguration
    let transport: any HTTPTransport
    let cache: LocalProfileCache
    let observers: ProfileObservers
    let listObservers: ProfileListObservers
    let randomUnit: @Sendable () -> Double
    /// Opens event streams; `nil` (in unit tests) follows none.
    let eventTransport: (any EventStreamTransport)?
    let liveSubscriptions = LiveSubscriptions()

    /// - Parameter configuration: the service's URL, the read-your-writes window, retries, token.
    public convenience init(configuration: ProfileClientConfiguration) {
        self.init(
            configuration: configuration, transport: URLSessionTransport(),
            eventTransport: URLSessionEventStreamTransport())
    }

    init(
        configuration: ProfileClientConfiguration, transport: any HTTPTransport,
        eventTransport: (any EventStreamTransport)? = nil,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
        randomUnit: @escaping @Sendable () -> Double = { Double.random(in: 0...1) }
    ) {
        self.configuration = configuration
        self.transport = transport
        self.observers = ProfileObservers()
        self.listObservers = ProfileListObservers()
        self.cache = LocalProfileCache(
            window: configuration.readYourWritesWindow, observers: observers, lists: listObservers, now: now)
        self.randomUnit = randomUnit
        self.eventTransport = eventTransport
    }

    deinit {
        liveSubscriptions.cancelAll()
        observers.finishAll()
        listObservers.finishAll()  // their termination cancels the tasks following their streams
    }

    /// Where a read may be answered from.
    public enum FetchPolicy: Sendable, Hashable {
        /// A profile this client wrote within the window answers without a network call.
        case useLocalWrites
        /// Always ask the service (still passing `min_version` of this client's last write).
        case reloadFromServer
    }

    /// Reads a profile, never older than what this client last wrote for it.
    /// - Throws: ``ProfileClientError``: `notFound`, `unauthorized`, `forbidden`, `unavailable`, `transport`…
    public func fetch(id: Int64, policy: FetchPolicy = .useLocalWrites) async throws(ProfileClientError) -> Profile {
        if policy == .useLocalWrites, let written = await cache.writtenProfile(id: id) {
            await cache.didFetch(written)
            return written
        }
        var path = "/users/profile/\(id)"
        if let minimum = await cache.minimumVersion(id: id) { path += "?min_version=\(minimum)" }
        let response = try await send(method: "GET", path: path, body: nil, isRead: true)
        guard response.status == 200 else { throw Self.error(for: response) }
        let profile = try Self.decodeProfile(response.body)
        await cache.didFetch(profile)
        return profile
    }

    /// Creates a profile (`If-None-Match: *`); 409 when the id exists (``ProfileClientError/conflict(current:)``)
    /// or the username is taken (``ProfileClientError/validation(field:detail:)`` on `username`).
    public func create(id: Int64, username: String, displayName: String) async throws(ProfileClientError) -> Profile {
        let body = try Self.encode(["username": username, "display_name": displayName])
        let response = try await send(
            method: "PUT", path: "/users/profile/\(id)", body: body, isRead: false, headers: ["If-None-Match": "*"])
        switch response.status {
        case 201, 200:
            let profile = try Self.decodeProfile(response.body)
            await cache.didWrite(profile)
            return profile
        default:
            let error = Self.error(for: response)
            if case .conflict(let current) = error { await cache.didFetch(current) }
            throw error
        }
    }

    /// Sets the display name if the profile is still at `expectedVersion`.
    ///
    /// Observers of `id` see the intended profile at once (when the client knows the profile),
    /// then the service's answer; on 409 the service's current profile; on any other failure the
    /// profile they saw before. With several updates of one id in flight, the latest intent is
    /// shown until it resolves, and an older answer never replaces a newer one.
    /// - Returns: the profile the service stored, at `expectedVersion + 1`.
    /// - Throws: ``ProfileClientError/conflict(current:)`` when the version is stale; never retried.
    public func updateDisplayName(id: Int64, to displayName: String, expectedVersion: Int32)
        async throws(ProfileClientError) -> Profile
    {
        let sequence = await cache.beginUpdate(id: id, displayName: displayName, expectedVersion: expectedVersion)
        do throws(ProfileClientError) {
            let body = try Self.encode(["display_name": displayName], version: expectedVersion)
            let response = try await send(method: "PUT", path: "/users/profile/\(id)", body: body, isRead: false)
            guard response.status == 200 else { throw Self.error(for: response) }
            let profile = try Self.decodeProfile(response.body)
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

    /// Every profile of `id` this client fetches, writes or shows optimistically, and every
    /// version committed anywhere (from the service's event stream, followed while anyone observes
    /// `id`), starting with the latest it knows. A version older than one the client has (its own
    /// write included) is never shown after it. Consecutive equal profiles are given once; a slow
    /// consumer keeps the newest 64. The stream ends when the consumer's task is cancelled or the
    /// client is released.
    public func updates(for id: Int64) -> AsyncStream<Profile> {
        let stream = observers.stream(for: id) { [weak self] in self?.liveSubscriptions.release(id) }
        if let eventTransport, configuration.followsLiveUpdates {
            liveSubscriptions.retain(id) { [configuration, cache, randomUnit] in
                Task {
                    await Self.follow(
                        id: id, transport: eventTransport, configuration: configuration, cache: cache,
                        randomUnit: randomUnit)
                }
            }
        }
        return stream
    }
}
