internal import CLibMemcached
internal import Glibc
internal import Logging

// Per-node operations: which node owns a key, and `flush_all` / `stats` on one node.
extension MemcachedConnection {
    /// The node that owns `key` under the cluster's consistent hashing, or nil for an invalid key.
    ///
    /// No network I/O: `memcached_server_by_key` only hashes the key onto the ring. A node in
    /// timeout still owns its keys (failed servers are never removed), so the answer is stable.
    ///
    /// Related libmemcached documentation:
    /// <https://awesomized.github.io/libmemcached/libmemcached/memcached_server_st.html>
    public func server(forKey key: String) -> MemcachedServer? {
        let handle = ownedHandle()
        guard Self.validate(key) == nil else { return nil }
        var key = key
        var rc = MEMCACHED_SUCCESS
        let instance = key.withUTF8 { keyBytes in
            keyBytes.withMemoryRebound(to: CChar.self) { memcached_server_by_key(handle, $0.baseAddress, $0.count, &rc) }
        }
        guard let instance, let name = memcached_server_name(instance) else { return nil }
        return MemcachedServer(host: String(cString: name), port: Int(memcached_server_port(instance)))
    }

    /// Sends `flush_all` to one node only, invalidating every item on it.
    ///
    /// For a node that missed writes while unreachable: its stale items must not be served once
    /// it is back. `memcached_flush` flushes every server of a handle, so this uses a handle with
    /// the same options and only `server`, made on first use and kept (see ``reconnect()``).
    ///
    /// - Returns: nil on success, else the error (``MemcachedError/Code/invalidConfiguration`` if
    ///   `server` is not part of the configuration).
    ///
    /// Related libmemcached documentation:
    /// <https://awesomized.github.io/libmemcached/libmemcached/memcached_flush.html>
    public func flush(server: MemcachedServer) -> MemcachedError? {
        withNode(server) { node in
            let rc = memcached_flush(node, 0)
            guard rc == MEMCACHED_SUCCESS else {
                return nodeFailure(rc, node: node, server: server, "memcached flush_all failed", level: .warning)
            }
            logger.info("memcached flush_all", metadata: ["memcached.server": "\(server)"])
            return nil
        }
    }

    /// The general-purpose `stats` of one node as name → value (e.g. `"curr_items"`, `"cmd_get"`),
    /// or nil if the node cannot be reached or is not part of the configuration.
    ///
    /// Uses `memcached_stat_execute`, which "executes a "stat" command on each server" of the
    /// handle holding only `server`, and hands each pair to a callback.
    ///
    /// Related libmemcached documentation:
    /// <https://awesomized.github.io/libmemcached/libmemcached/memcached_stats.html>
    public func stats(server: MemcachedServer) -> [String: String]? {
        _ = ownedHandle()
        guard case .success(let node) = nodeHandle(server) else { return nil }
        var stats: [String: String] = [:]
        let rc = withUnsafeMutablePointer(to: &stats) { statsPointer in
            memcached_stat_execute(
                node, nil,
                { _, key, keyLength, value, valueLength, context in
                    // Copy out: key and value point into libmemcached's read buffer.
                    guard let key, let context else { return MEMCACHED_SUCCESS }
                    let name = String(decoding: UnsafeRawBufferPointer(start: key, count: keyLength), as: UTF8.self)
                    let text =
                        value.map {
                            String(decoding: UnsafeRawBufferPointer(start: $0, count: valueLength), as: UTF8.self)
                        } ?? ""
                    context.assumingMemoryBound(to: [String: String].self).pointee[name] = text
                    return MEMCACHED_SUCCESS
                }, statsPointer)
        }
        guard rc == MEMCACHED_SUCCESS else {
            _ = nodeFailure(rc, node: node, server: server, "memcached stats failed", level: .debug)
            return nil
        }
        return stats
    }

    /// One round trip to one node: a `get` of a key nobody stores. nil when the node answered
    /// (hit or miss), else the error. For readiness checks.
    ///
    /// Not `memcached_version`: libmemcached asks each node for its version once per socket
    /// ("Optimization, we only fetch version once", src/libmemcached/version.cc) and then answers
    /// without any I/O.
    public func ping(server: MemcachedServer) -> MemcachedError? {
        withNode(server) { node in
            var length = 0
            var flags: UInt32 = 0
            var rc = MEMCACHED_SUCCESS
            let key = "memcached-client:ping"
            let value = key.withCString { memcached_get(node, $0, key.utf8.count, &length, &flags, &rc) }
            free(value)
            switch rc {
            case MEMCACHED_SUCCESS, MEMCACHED_NOTFOUND, MEMCACHED_END: return nil
            default: return Self.error(rc, handle: node)
            }
        }
    }

    /// `body` with the handle of `server` alone (on the owner thread), or the error of making it.
    private func withNode(
        _ server: MemcachedServer, _ body: (UnsafeMutablePointer<memcached_st>) -> MemcachedError?
    ) -> MemcachedError? {
        _ = ownedHandle()
        switch nodeHandle(server) {
        case .success(let node): return body(node)
        case .failure(let error): return error
        }
    }

    /// The handle over `server` alone with the cluster's options, made on first use and owned
    /// by this connection (freed by ``reconnect()`` and ``close()``).
    private func nodeHandle(_ server: MemcachedServer) -> Result<UnsafeMutablePointer<memcached_st>, MemcachedError> {
        if let node = nodeHandles[server] { return .success(node.pointer) }
        guard configuration.servers.contains(server) else {
            return .failure(.invalidConfiguration("memcached server \(server) is not part of this configuration"))
        }
        do {
            let node = try MemcachedHandle.make(configuration.configurationString(for: server), configuration: configuration)
            nodeHandles[server] = node
            return .success(node.pointer)
        } catch {
            return .failure(error)
        }
    }

    /// The error of a call to one node, logged at `level` with the node and libmemcached's words.
    private func nodeFailure(
        _ rc: memcached_return_t, node: UnsafeMutablePointer<memcached_st>, server: MemcachedServer,
        _ message: Logger.Message, level: Logger.Level
    ) -> MemcachedError {
        let error = Self.error(rc, handle: node)
        logger.log(
            level: level, message,
            metadata: ["memcached.server": "\(server)", "memcached.code": "\(error.code)", "memcached.message": "\(error.message)"])
        return error
    }
}
