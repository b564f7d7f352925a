import Dispatch
import Foundation
import Logging
import MemcachedClient
import PostgresClient
import Synchronization
import TestSupport

@testable import ProfileService

/// One thread's real connections (PostgreSQL and the memcached cluster of scripts/deps.sh).
/// Create it on the thread that uses it: the connections check their owner thread.
final class IntegrationBackends {
    let connection: PostgresConnection
    let cache: MemcachedConnection
    let store: PostgresProfileStore
    static let logger = Logger(label: "test")

    init() throws {
        try TestEnvironment.requirePostgres()
        try TestEnvironment.requireMemcached()
        connection = PostgresConnection(
            configuration: try PostgresConfiguration(url: TestEnvironment.databaseURL),
            statements: PostgresProfileStore.statements, logger: Self.logger)
        try connection.connect()
        cache = try MemcachedConnection(
            configuration: try MemcachedConfiguration(servers: TestEnvironment.memcachedServerList),
            logger: Self.logger)
        store = PostgresProfileStore(connection: connection, logger: Self.logger)
    }

    func repository(_ shared: ProfileCacheShared, cache: (any CacheClient)? = nil) -> ProfileRepository {
        ProfileRepository(store: store, cache: cache ?? self.cache, shared: shared, logger: Self.logger)
    }

    /// A new profile at version 1 with an id no other test uses, and no cache entry.
    func seed() throws -> Profile {
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        let profile = try store.create(id: id, username: "u\(id)", displayName: "Seed \(id)")
        _ = cache.delete(ProfileCacheConfiguration().key(for: id))
        return profile
    }

    /// The version of the profile entry cached for `id`, `nil` when there is none.
    func cachedVersion(_ id: Int64, shared: ProfileCacheShared) -> Int32? {
        guard case .hit(let item) = cache.get(shared.configuration.key(for: id)),
            case .profile(let version, _)? = CacheEntry(decoding: item.value)
        else { return nil }
        return version
    }

    deinit {
        cache.close()
        connection.close()
    }
}

/// Holds the first reader of one id that reaches the hook it is installed as, until released.
final class ReaderGate: Sendable {
    private let armedID = Mutex<Int64?>(nil)
    private let paused = DispatchSemaphore(value: 0)
    private let released = DispatchSemaphore(value: 0)

    func arm(_ id: Int64) { armedID.withLock { $0 = id } }

    /// The hook: pauses once, for the armed id (any of ``ProfileCacheHooks``' points).
    func pause(_ id: Int64) {
        let shouldPause = armedID.withLock { armed in
            guard armed == id else { return false }
            armed = nil
            return true
        }
        guard shouldPause else { return }
        paused.signal()
        released.wait()
    }

    func waitUntilPaused() { paused.wait() }
    func release() { released.signal() }
}

/// A cache whose stores always lose (CAS conflicts, adds that find a key): drives a
/// write-through into its delete path without touching anything else.
final class ConflictingCache: CacheClient {
    let base: MemcachedConnection

    init(_ base: MemcachedConnection) { self.base = base }

    func get(_ key: String) -> MemcachedGetResult { base.get(key) }
    func add(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedStoreResult { .notStored }
    func cas(_ key: String, value: [UInt8], cas: UInt64, flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        .exists
    }
    func delete(_ key: String) -> MemcachedDeleteResult { base.delete(key) }
    func server(forKey key: String) -> MemcachedServer? { base.server(forKey: key) }
    func flush(server: MemcachedServer) -> MemcachedError? { base.flush(server: server) }
}
