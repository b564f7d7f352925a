import MemcachedClient
import ProfileServiceTesting

@testable import ProfileService

final class OperationLog {
    var entries: [String] = []
}

/// The cache operations a write makes, in order (an `addAndGet` around a body as two entries).
final class RecordingCache: CacheClient {
    let base: any CacheClient
    let log: OperationLog

    init(_ base: any CacheClient, log: OperationLog) {
        self.base = base
        self.log = log
    }

    func addAndGet<Value, Failure: Error>(
        _ key: String, value: [UInt8], flags: UInt32, expiration: Int, around body: () throws(Failure) -> Value
    ) throws(Failure) -> (value: Value, found: MemcachedGetResult) {
        log.entries.append("look sent")
        let found = base.addAndGet(key, value: value, flags: flags, expiration: expiration)
        let value = try body()
        log.entries.append("look read")
        return (value, found)
    }

    func addAndGet<Value, Failure: Error>(
        many stores: [MemcachedStore], flags: UInt32, around body: () throws(Failure) -> Value
    ) throws(Failure) -> (value: Value, found: Result<[String: MemcachedItem], MemcachedError>) {
        log.entries.append("looks sent")
        let found = base.addAndGet(many: stores, flags: flags)
        let value = try body()
        log.entries.append("looks read")
        return (value, found)
    }

    func casAndGet(many stores: [MemcachedStore], flags: UInt32) -> Result<[String: MemcachedItem], MemcachedError> {
        log.entries.append("cas together")
        return base.casAndGet(many: stores, flags: flags)
    }

    func get(_ key: String) -> MemcachedGetResult {
        log.entries.append("get")
        return base.get(key)
    }
    func add(_ key: String, value: [UInt8], flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        log.entries.append("add")
        return base.add(key, value: value, flags: flags, expiration: expiration)
    }
    func cas(_ key: String, value: [UInt8], cas: UInt64, flags: UInt32, expiration: Int) -> MemcachedStoreResult {
        log.entries.append("cas")
        return base.cas(key, value: value, cas: cas, flags: flags, expiration: expiration)
    }
    func delete(_ key: String) -> MemcachedDeleteResult {
        log.entries.append("delete")
        return base.delete(key)
    }
    func server(forKey key: String) -> MemcachedServer? { base.server(forKey: key) }
    func flush(server: MemcachedServer) -> MemcachedError? { base.flush(server: server) }
}

class RecordingStore: ForwardingProfileStore {
    let log: OperationLog

    init(_ base: any ProfileStore, log: OperationLog) {
        self.log = log
        super.init(base)
    }

    override func profile(id: Int64) throws(ProfileStoreError) -> Profile? {
        log.entries.append("read row")
        return try base.profile(id: id)
    }

    override func profiles(ids: [Int64]) throws(ProfileStoreError) -> [Int64: Profile] {
        log.entries.append("read rows")
        return try base.profiles(ids: ids)
    }

    override func update(id: Int64, changes: ProfileChanges, expectedVersion: Int32?)
        throws(ProfileStoreError) -> ProfileUpdateOutcome
    {
        log.entries.append("update")
        return try base.update(id: id, changes: changes, expectedVersion: expectedVersion)
    }

    override func updateProfiles(_ writes: [ProfileUpdate]) throws(ProfileStoreError) -> [Int64: Profile]? {
        log.entries.append("update together")
        return try base.updateProfiles(writes)
    }
}
