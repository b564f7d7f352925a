internal import CLibMemcached
internal import Glibc
public import Logging
import ServiceRuntime

/// One libmemcached handle (`memcached_st`) over the whole cluster, hashing each key to its node
/// with consistent hashing.
///
/// A connection belongs to one thread: the first operation records the calling thread, and every
/// later operation checks it (`precondition`). libmemcached(3), "Threads and processes": "it is
/// important to keep one instance of memcached_st per process or thread. Without creating your
/// own locking structures you can not share a single memcached_st." Give each worker thread its
/// own connection.
///
/// Operations never throw: each returns an outcome enum whose `failure` case carries a
/// ``MemcachedError`` with libmemcached's message. A node that fails is put in timeout for
/// ``MemcachedConfiguration/retryTimeout`` and its keys fail fast (``MemcachedError/Code/serverMarkedDead``)
/// until then; it is never removed from the ring, and the same connection uses it again once
/// it is back.
///
/// - Important: that skip follows connection failures only. A node that accepts connections but
///   never answers (a stopped process) costs every operation on its keys the full poll timeout
///   and returns ``MemcachedError/Code/timeout``: libmemcached 1.1.4 closes the socket on a poll
///   timeout but does not put the node in timeout (measured in `MemcachedClusterTests`).
///
/// Call ``close()`` on the owner thread when done; `deinit` asserts that it was called (in
/// release builds it frees the handles quietly).
///
/// Related libmemcached documentation:
/// <https://awesomized.github.io/libmemcached/libmemcached/memcached_create.html>,
/// <https://awesomized.github.io/libmemcached/libmemcached/memcached_get.html>,
/// <https://awesomized.github.io/libmemcached/libmemcached/memcached_set.html>,
/// <https://awesomized.github.io/libmemcached/libmemcached/memcached_cas.html>,
/// <https://awesomized.github.io/libmemcached/libmemcached/memcached_delete.html>
public final class MemcachedConnection {
    /// The owned `memcached_st` and the result storage every `get` reuses; nil once closed.
    private var handle: MemcachedHandle?
    /// Handles over one node each, for ``flush(server:)``, ``stats(server:)`` and
    /// ``ping(server:)``: made on first use, kept until ``reconnect()`` or ``close()``.
    var nodeHandles: [MemcachedServer: MemcachedHandle] = [:]
    /// The thread of the first operation; every later one, and ``close()``, must come from it.
    private var ownerThread = OwnerThread("MemcachedConnection")
    let configuration: MemcachedConfiguration
    let logger: Logger

    /// Creates the handle from ``MemcachedConfiguration/configurationString``. No network I/O:
    /// libmemcached connects to each node on first use.
    ///
    /// - Throws: ``MemcachedError`` (``MemcachedError/Code/invalidConfiguration``) if
    ///   `memcached()` returns NULL.
    public init(configuration: MemcachedConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        self.handle = try MemcachedHandle.make(configuration.configurationString, configuration: configuration)
    }

    /// Frees the handle and closes its sockets, on the owner thread. Idempotent; any operation
    /// after it is a programming error.
    public func close() {
        ownerThread.check()
        handle?.close()
        handle = nil
        freeNodeHandles()
    }

    /// Closes every socket and forgets every node's failure state by replacing the handle with a
    /// new one of the same configuration; the next operation on each node connects again.
    ///
    /// libmemcached keeps a failed node in timeout per handle and clears it only when a connect
    /// succeeds, which it does not try before the timeout ends ("a host which is problematic
    /// will only be checked for usage based on the amount of time set by this behavior"). When
    /// something else (the service's shared circuit breaker) knows the node is back, this makes
    /// the handle use it at once.
    ///
    /// - Important: on the owner thread, like every operation. If a new handle cannot be made
    ///   (memory), the old one is kept.
    public func reconnect() {
        _ = ownedHandle()
        guard let fresh = try? MemcachedHandle.make(configuration.configurationString, configuration: configuration) else {
            logger.warning("memcached reconnect failed: the old handle is kept")
            return
        }
        handle?.close()
        handle = fresh
        freeNodeHandles()
        logger.debug("memcached handle renewed")
    }

    private func freeNodeHandles() {
        for node in nodeHandles.values { node.close() }
        nodeHandles = [:]
    }

    /// Every node of the cluster, in the order of the configuration.
    public var servers: [MemcachedServer] { configuration.servers }

    /// Checks the owner thread (recording it on first use) and returns the open handle.
    @inline(__always)
    func ownedHandle() -> UnsafeMutablePointer<memcached_st> {
        ownerThread.check()
        guard let handle else { preconditionFailure("MemcachedConnection used after close()") }
        return handle.pointer
    }

    /// The result storage of the open handle, reused by every fetch.
    private var result: UnsafeMutablePointer<memcached_result_st>? { handle?.result }

    // MARK: - Operations

    /// Reads a key with `gets`: value, flags and CAS unique in one round trip.
    ///
    /// Implemented as `memcached_mget` of one key and `memcached_fetch_result` until NULL: "You
    /// should continue to call this function until it returns a NULL (i.e. no more values)";
    /// "MEMCACHED_END is returned by the *error value when all objects that have been found have
    /// been returned", "MEMCACHED_NOTFOUND will be returned if no keys at all were found."
    public func get(_ key: String) -> MemcachedGetResult {
        let handle = ownedHandle()
        if let error = Self.validate(key) { return .failure(error) }
        if let error = requestGet(key, handle) { return .failure(error) }
        return readGetAnswer(key, handle)
    }

    /// Sends `gets` of one key (``get(_:)``'s first half); the answer waits for ``readGetAnswer(_:_:)``.
    private func requestGet(_ key: String, _ handle: UnsafeMutablePointer<memcached_st>) -> MemcachedError? {
        var key = key
        return key.withUTF8 { keyBytes in
            keyBytes.withMemoryRebound(to: CChar.self) { keyChars in
                var keyPointer: UnsafePointer<CChar>? = keyChars.baseAddress
                var keyLength = keyChars.count
                let rc = memcached_mget(handle, &keyPointer, &keyLength, 1)
                return rc == MEMCACHED_SUCCESS ? nil : self.error(rc, "get")
            }
        }
    }

    /// Reads the answer to ``requestGet(_:_:)``: `memcached_fetch_result` until NULL.
    private func readGetAnswer(_ key: String, _ handle: UnsafeMutablePointer<memcached_st>) -> MemcachedGetResult {
        var key = key
        return key.withUTF8 { keyBytes in
            keyBytes.withMemoryRebound(to: CChar.self) { keyChars in
                var item: MemcachedItem?
                var fetchRC = MEMCACHED_SUCCESS
                while let fetched = memcached_fetch_result(handle, self.result, &fetchRC) {
                    // An answer for another key means the connection is out of step with its
                    // requests (a reply to a `noreply` command, see addAndGet): never use it.
                    guard memcached_result_key_length(fetched) == keyChars.count,
                        memcmp(memcached_result_key_value(fetched), keyChars.baseAddress!, keyChars.count) == 0
                    else {
                        memcached_quit(handle)
                        return .failure(
                            MemcachedError(
                                code: .serverError, message: "memcached answered for another key; reconnecting",
                                returnCode: Int32(MEMCACHED_PROTOCOL_ERROR.rawValue)))
                    }
                    item = Self.item(copying: fetched)
                }
                switch fetchRC {
                case MEMCACHED_END, MEMCACHED_NOTFOUND, MEMCACHED_SUCCESS:
                    return item.map { .hit($0) } ?? .miss
                default:
                    return .failure(self.error(fetchRC, "get"))
                }
            }
        }
    }

    /// Reads several keys with `gets`, written to every node they live on before any answer is
    /// read: one round trip for all of them, however many there are.
    ///
    /// - Returns: the items found, by key (a key not among them is a miss: its node answered
    ///   that it has none), or the failure: when any node fails — cannot be reached, breaks the
    ///   connection, or stays silent past the poll timeout — the answers of the others are read
    ///   out (so the connection stays in step) and nothing is returned but the error, naming
    ///   that node.
    public func get(many keys: [String]) -> Result<[String: MemcachedItem], MemcachedError> {
        let handle = ownedHandle()
        guard !keys.isEmpty else { return .success([:]) }
        return requestMany(keys, handle).flatMap { readAnswers(to: $0, handle) }
    }

    /// A multi-get written to the nodes, its answers not read yet.
    private struct PendingMultiGet {
        let requested: Set<String>
        let sendCode: memcached_return_t
        /// A node that should have been asked but was not (libmemcached skipped it).
        let unasked: MemcachedServer?
    }

    /// Writes `gets` of every key to the nodes they live on; ``readAnswers(to:_:)`` reads them.
    private func requestMany(
        _ keys: [String], _ handle: UnsafeMutablePointer<memcached_st>
    ) -> Result<PendingMultiGet, MemcachedError> {
        var joined: [CChar] = []
        var lengths: [Int] = []
        lengths.reserveCapacity(keys.count)
        for key in keys {
            if let error = Self.validate(key) { return .failure(error) }
            var key = key
            key.withUTF8 { bytes in
                bytes.withMemoryRebound(to: CChar.self) { joined.append(contentsOf: $0) }
                lengths.append(bytes.count)
            }
        }
        return joined.withUnsafeBufferPointer { chars in
            var pointers: [UnsafePointer<CChar>?] = []
            pointers.reserveCapacity(keys.count)
            var offset = 0
            for length in lengths {
                pointers.append(chars.baseAddress! + offset)
                offset += length
            }
            memcached_reset_last_disconnected_server(handle)
            let rc = memcached_mget(handle, pointers, lengths, keys.count)
            // libmemcached 1.1.4's mget skips a node it cannot connect to and still answers
            // MEMCACHED_SUCCESS (src/libmemcached/get.cc: `continue` after a failed connect), so its
            // keys would read as misses: a node that got the request has an answer pending.
            var unasked: MemcachedServer?
            var nodes = Set<UInt32>()
            for (pointer, length) in zip(pointers, lengths) {
                let position = memcached_generate_hash(handle, pointer, length)
                guard nodes.insert(position).inserted else { continue }
                let instance = memcached_server_instance_by_position(handle, position)
                if let instance, memcached_server_response_count(instance) == 0 {
                    unasked = Self.server(instance)
                }
            }
            return .success(PendingMultiGet(requested: Set(keys), sendCode: rc, unasked: unasked))
        }
    }

    /// Reads every answer of a multi-get ``requestMany(_:_:)`` sent.
    private func readAnswers(
        to pending: PendingMultiGet, _ handle: UnsafeMutablePointer<memcached_st>
    ) -> Result<[String: MemcachedItem], MemcachedError> {
        let rc = pending.sendCode
        var items: [String: MemcachedItem] = [:]
        var outOfStep = false
        var fetchRC = MEMCACHED_SUCCESS
        // Read every answer that arrives, even after a failure, so none is left for the next call.
        while let fetched = memcached_fetch_result(handle, self.result, &fetchRC) {
            let keyBytes = UnsafeRawBufferPointer(
                start: memcached_result_key_value(fetched), count: memcached_result_key_length(fetched))
            let key = String(decoding: keyBytes, as: UTF8.self)
            guard pending.requested.contains(key) else {
                outOfStep = true
                continue
            }
            items[key] = Self.item(copying: fetched)
        }
        if outOfStep {
            // See get(_:): an answer for a key not asked for; never trust this connection's order.
            memcached_quit(handle)
            return .failure(
                MemcachedError(
                    code: .serverError, message: "memcached answered for another key; reconnecting",
                    returnCode: Int32(MEMCACHED_PROTOCOL_ERROR.rawValue)))
        }
        var failure: MemcachedError
        if rc != MEMCACHED_SUCCESS {
            failure = self.error(rc, "get")
        } else if let unasked = pending.unasked {
            failure = MemcachedError(
                code: .connectionFailure, message: "a node of the multi-get could not be reached",
                returnCode: Int32(MEMCACHED_SOME_ERRORS.rawValue), node: unasked)
        } else if let silent = Self.nodeOwingAnAnswer(handle) {
            // Only a positive answer is an answer (docs/design.md §2.4): with two or more
            // nodes owing answers, libmemcached 1.1.4 polls them together, and when none is
            // readable within the poll timeout it leaves its fetch loop with
            // MEMCACHED_NOTFOUND (src/libmemcached/io.cc memcached_io_get_readable_server),
            // as if every key were absent. A node that still owes its answer was silent.
            failure = MemcachedError(
                code: .timeout, message: "a node of the multi-get did not answer within the poll timeout",
                returnCode: Int32(MEMCACHED_TIMEOUT.rawValue), node: silent)
        } else {
            switch fetchRC {
            case MEMCACHED_END, MEMCACHED_NOTFOUND, MEMCACHED_SUCCESS:
                return .success(items)
            default:
                failure = self.error(fetchRC, "get")
            }
        }
        // Name the failed node (a timeout or broken connection marks it the last disconnected)
        // so the caller can hold it against that node alone.
        if failure.node == nil, let instance = memcached_server_get_last_disconnect(handle) {
            failure.node = Self.server(instance)
        }
        // A fetch that stopped at one node's failure may leave another node's answers
        // unread: start every node afresh rather than read them as the next call's.
        memcached_quit(handle)
        return .failure(failure)
    }

    /// The first node of the handle that was sent a request whose answer has not been read.
    private static func nodeOwingAnAnswer(_ handle: UnsafeMutablePointer<memcached_st>) -> MemcachedServer? {
        for position in 0..<memcached_server_count(handle) {
            if let instance = memcached_server_instance_by_position(handle, position),
                memcached_server_response_count(instance) > 0
            {
                return server(instance)
            }
        }
        return nil
    }

    private static func server(_ instance: OpaquePointer) -> MemcachedServer {
        MemcachedServer(host: String(cString: memcached_server_name(instance)), port: Int(memcached_server_port(instance)))
    }

    /// Copies a fetched result out: its buffer is reused by the next fetch.
    private static func item(copying fetched: UnsafePointer<memcached_result_st>) -> MemcachedItem {
        let length = memcached_result_length(fetched)
        let value: [UInt8]
        if length == 0 {
            value = []
        } else {
            let bytes = UnsafeRawPointer(memcached_result_value(fetched)!)
            value = [UInt8](UnsafeRawBufferPointer(start: bytes, count: length))
        }
        return MemcachedItem(value: value, flags: memcached_result_flags(fetched), cas: memcached_result_cas(fetched))
    }

    /// `add` the value without waiting for its answer, then `gets` the key: one round trip that
    /// returns the entry as it is after the add — the value just added if the key was free,
    /// otherwise what was there (the add changed nothing).
    ///
    /// The `add` is sent with `noreply` (`MEMCACHED_BEHAVIOR_NOREPLY` around the one call), which
    /// libmemcached sends at once without counting an answer to wait for; memcached answers only
    /// the `gets`. Whether the add won shows in the value read back, so make the value unique
    /// (a lease token). memcached still answers a `noreply` command that fails for lack of
    /// memory; ``get(_:)`` then sees an answer for the wrong request, so any failure here closes
    /// the connections (`memcached_quit`) rather than read out of step.
    public func addAndGet(
        _ key: String, value: [UInt8], flags: UInt32 = 0, expiration: Int = 0
    ) -> MemcachedGetResult {
        addAndGet(key, value: value, flags: flags, expiration: expiration, around: {}).found
    }

    /// ``addAndGet(_:value:flags:expiration:)`` with `body` run while the answer travels: the
    /// `add` and the `gets` are sent, `body` runs, then the answer is read — one round trip
    /// overlapped with whatever `body` waits on (a PostgreSQL statement on another connection).
    /// The entry read is as memcached held it at some moment between the send and the end of
    /// `body`. `body` must not use this connection. When it throws, the answer is still read
    /// (the connection stays in step) and the error is rethrown.
    public func addAndGet<Value, Failure: Error>(
        _ key: String, value: [UInt8], flags: UInt32 = 0, expiration: Int = 0,
        around body: () throws(Failure) -> Value
    ) throws(Failure) -> (value: Value, found: MemcachedGetResult) {
        let handle = ownedHandle()
        if let error = Self.validate(key) { return (try body(), .failure(error)) }
        let sent = withoutReplies(handle) {
            store("add", key, value) { handle, key, keyLength, value, valueLength in
                memcached_add(handle, key, keyLength, value, valueLength, expiration, flags)
            }
        }
        let requestError: MemcachedError? = if case .failure(let error) = sent { error } else { requestGet(key, handle) }
        let outcome = Result(catching: body)
        let found: MemcachedGetResult = requestError.map { .failure($0) } ?? readGetAnswer(key, handle)
        if case .failure = found { memcached_quit(handle) }
        return (try outcome.get(), found)
    }

    /// Runs `send` with `MEMCACHED_BEHAVIOR_NOREPLY` set: libmemcached sends its stores at once
    /// and counts no answer to wait for (see ``addAndGet(_:value:flags:expiration:)``).
    private func withoutReplies<Sent>(_ handle: UnsafeMutablePointer<memcached_st>, _ send: () -> Sent) -> Sent {
        memcached_behavior_set(handle, MEMCACHED_BEHAVIOR_NOREPLY, 1)
        defer { memcached_behavior_set(handle, MEMCACHED_BEHAVIOR_NOREPLY, 0) }
        return send()
    }

    /// ``addAndGet(_:value:flags:expiration:)`` for several keys in one round trip per node:
    /// every `add` is sent with `noreply`, then one multi-get reads every key back. Whether an add
    /// won shows in the value read back. Any failure closes the connections, as there.
    ///
    /// - Returns: the items found by key (a key not among them is a miss).
    public func addAndGet(many stores: [MemcachedStore], flags: UInt32 = 0) -> Result<[String: MemcachedItem], MemcachedError> {
        storeAndGet(stores) { handle, key, keyLength, value, valueLength, store in
            memcached_add(handle, key, keyLength, value, valueLength, store.expiration, flags)
        }
    }

    /// `cas` of several values, each over the CAS unique it names, then one multi-get of every
    /// key, in one round trip per node: every `cas` is sent with `noreply`, so whether one landed
    /// shows only in the value read back (the value stored, or another). Any failure closes the
    /// connections, as ``addAndGet(_:value:flags:expiration:)`` does.
    ///
    /// - Returns: the items found by key after the stores (a key not among them is a miss).
    public func casAndGet(many stores: [MemcachedStore], flags: UInt32 = 0) -> Result<[String: MemcachedItem], MemcachedError> {
        storeAndGet(stores) { handle, key, keyLength, value, valueLength, store in
            memcached_cas(handle, key, keyLength, value, valueLength, store.expiration, flags, store.cas)
        }
    }

    /// ``addAndGet(many:flags:)`` with `body` run while the answers travel: every `add` and the
    /// multi-get are sent, `body` runs, then the answers are read — one round trip per node
    /// overlapped with whatever `body` waits on (a PostgreSQL statement on another connection),
    /// as ``addAndGet(_:value:flags:expiration:around:)`` does for one key. Each entry read is as
    /// memcached held it at some moment between the send and the end of `body`. `body` must not
    /// use this connection; it runs exactly once, also when memcached fails.
    public func addAndGet<Value, Failure: Error>(
        many stores: [MemcachedStore], flags: UInt32 = 0, around body: () throws(Failure) -> Value
    ) throws(Failure) -> (value: Value, found: Result<[String: MemcachedItem], MemcachedError>) {
        let handle = ownedHandle()
        guard !stores.isEmpty else { return (try body(), .success([:])) }
        let pending = sendStores(stores, handle) { handle, key, keyLength, value, valueLength, store in
            memcached_add(handle, key, keyLength, value, valueLength, store.expiration, flags)
        }.flatMap { requestMany(stores.map(\.key), handle) }
        let outcome = Result(catching: body)
        let found = pending.flatMap { readAnswers(to: $0, handle) }
        if case .failure = found { memcached_quit(handle) }
        return (try outcome.get(), found)
    }

    private func storeAndGet(
        _ stores: [MemcachedStore],
        _ call: (UnsafeMutablePointer<memcached_st>, UnsafePointer<CChar>?, Int, UnsafePointer<CChar>?, Int, MemcachedStore)
            -> memcached_return_t
    ) -> Result<[String: MemcachedItem], MemcachedError> {
        let handle = ownedHandle()
        if case .failure(let error) = sendStores(stores, handle, call) { return .failure(error) }
        let result = get(many: stores.map(\.key))
        if case .failure = result { memcached_quit(handle) }
        return result
    }

    /// Sends every store with `noreply`; on a failure the connections are closed, since an
    /// answer may be pending that nothing will read.
    private func sendStores(
        _ stores: [MemcachedStore], _ handle: UnsafeMutablePointer<memcached_st>,
        _ call: (UnsafeMutablePointer<memcached_st>, UnsafePointer<CChar>?, Int, UnsafePointer<CChar>?, Int, MemcachedStore)
            -> memcached_return_t
    ) -> Result<Void, MemcachedError> {
        for store in stores { if let error = Self.validate(store.key) { return .failure(error) } }
        let failure: MemcachedError? = withoutReplies(handle) {
            for request in stores {
                if case .failure(let error) = store("store", request.key, request.value, { call($0, $1, $2, $3, $4, request) }) {
                    return error
                }
            }
            return nil
        }
        if let failure {
            memcached_quit(handle)
            return .failure(failure)
        }
        return .success(())
    }

    /// Stores a value only if the key does not exist (`add`); ``MemcachedStoreResult/notStored``
    /// if it does (ASCII protocol: `MEMCACHED_NOTSTORED`).
    public func add(
        _ key: String, value: [UInt8], flags: UInt32 = 0, expiration: Int = 0
    ) -> MemcachedStoreResult {
        store("add", key, value) { handle, key, keyLength, value, valueLength in
            memcached_add(handle, key, keyLength, value, valueLength, expiration, flags)
        }
    }

    /// Stores a value unconditionally (`set`).
    ///
    /// - Parameter expiration: seconds to live (memcached relative TTL); 0 for no expiry.
    public func set(
        _ key: String, value: [UInt8], flags: UInt32 = 0, expiration: Int = 0
    ) -> MemcachedStoreResult {
        store("set", key, value) { handle, key, keyLength, value, valueLength in
            memcached_set(handle, key, keyLength, value, valueLength, expiration, flags)
        }
    }

    /// Stores a value only if the item still has the CAS unique read by ``get(_:)``.
    ///
    /// ``MemcachedStoreResult/exists`` if it changed since (`MEMCACHED_DATA_EXISTS`),
    /// ``MemcachedStoreResult/notFound`` if it is gone (`MEMCACHED_NOTFOUND`).
    public func cas(
        _ key: String, value: [UInt8], cas: UInt64, flags: UInt32 = 0, expiration: Int = 0
    ) -> MemcachedStoreResult {
        store("cas", key, value) { handle, key, keyLength, value, valueLength in
            memcached_cas(handle, key, keyLength, value, valueLength, expiration, flags, cas)
        }
    }

    /// Deletes a key.
    public func delete(_ key: String) -> MemcachedDeleteResult {
        let handle = ownedHandle()
        if let error = Self.validate(key) { return .failure(error) }
        var key = key
        let rc = key.withUTF8 { keyBytes in
            keyBytes.withMemoryRebound(to: CChar.self) { memcached_delete(handle, $0.baseAddress, $0.count, 0) }
        }
        switch rc {
        case MEMCACHED_SUCCESS, MEMCACHED_DELETED: return .deleted
        case MEMCACHED_NOTFOUND: return .notFound
        default: return .failure(error(rc, "delete"))
        }
    }

    private func store(
        _ operation: StaticString,
        _ key: String,
        _ value: [UInt8],
        _ call: (UnsafeMutablePointer<memcached_st>, UnsafePointer<CChar>?, Int, UnsafePointer<CChar>?, Int)
            -> memcached_return_t
    ) -> MemcachedStoreResult {
        let handle = ownedHandle()
        if let error = Self.validate(key) { return .failure(error) }
        var key = key
        let rc = key.withUTF8 { keyBytes in
            keyBytes.withMemoryRebound(to: CChar.self) { keyChars in
                value.withUnsafeBytes { valueBytes in
                    // An empty array may have no storage: pass a valid pointer with length 0.
                    let valuePointer = valueBytes.baseAddress ?? UnsafeRawPointer(keyChars.baseAddress!)
                    return call(
                        handle, keyChars.baseAddress, keyChars.count,
                        valuePointer.assumingMemoryBound(to: CChar.self), valueBytes.count)
                }
            }
        }
        switch rc {
        case MEMCACHED_SUCCESS, MEMCACHED_STORED: return .stored
        case MEMCACHED_NOTSTORED: return .notStored
        case MEMCACHED_DATA_EXISTS: return .exists
        case MEMCACHED_NOTFOUND: return .notFound
        default: return .failure(error(rc, operation))
        }
    }

    // MARK: - Errors

    /// Builds the error for a failing return code with libmemcached's last error message
    /// (which names the server and the system error), and logs it at debug level (never the key
    /// or the value).
    func error(_ rc: memcached_return_t, _ operation: StaticString) -> MemcachedError {
        let error = Self.error(rc, handle: handle?.pointer)
        logger.debug(
            "memcached \(operation) failed",
            metadata: ["memcached.code": "\(error.code)", "memcached.rc": "\(error.returnCode)",
                "memcached.message": "\(error.message)"])
        return error
    }

    static func error(_ rc: memcached_return_t, handle: UnsafeMutablePointer<memcached_st>?) -> MemcachedError {
        // memcached_mget reports a send failure on some server as MEMCACHED_SOME_ERRORS (or
        // MEMCACHED_FAILURE); the cause is the handle's last error.
        var code = rc
        if rc == MEMCACHED_SOME_ERRORS || rc == MEMCACHED_FAILURE, let handle {
            let last = memcached_last_error(handle)
            if last != MEMCACHED_SUCCESS { code = last }
        }
        var message = ""
        if let handle, memcached_last_error(handle) != MEMCACHED_SUCCESS,
            let text = memcached_last_error_message(handle)
        {
            message = String(cString: text)
        }
        if message.isEmpty, let text = memcached_strerror(handle, code) {
            message = String(cString: text)
        }
        return MemcachedError(code: MemcachedError.Code(code), message: message, returnCode: Int32(code.rawValue))
    }

    // MARK: - Keys

    /// memcached's ASCII protocol: "the key must not include control characters or whitespace",
    /// and "Currently the length limit of a key is set at 250 characters" (protocol.txt).
    static func validate(_ key: String) -> MemcachedError? {
        var count = 0
        for byte in key.utf8 {
            if byte <= 0x20 || byte == 0x7F {
                return invalidKey("memcached key contains whitespace or a control character")
            }
            count += 1
        }
        if count == 0 { return invalidKey("memcached key is empty") }
        if count > 250 { return invalidKey("memcached key is \(count) bytes, more than 250") }
        return nil
    }

    private static func invalidKey(_ message: String) -> MemcachedError {
        MemcachedError(code: .invalidKey, message: message, returnCode: Int32(MEMCACHED_BAD_KEY_PROVIDED.rawValue))
    }
}

/// Not Sendable: it owns a `memcached_st`, which libmemcached does not allow two threads to use.
/// Give each thread its own connection.
@available(*, unavailable)
extension MemcachedConnection: Sendable {}
