internal import CLibMemcached

/// Owns one libmemcached `memcached_st` and the `memcached_result_st` its fetches reuse, and
/// frees both exactly once.
///
/// The same rule as every C handle of the service (`PGConnectionHandle`, `PostgresResultHandle`):
///
/// - Operations and ``close()`` run on the owner's thread: ``MemcachedConnection`` checks it
///   (`OwnerThread`) before it touches the handle. libmemcached(3): "Without creating your own
///   locking structures you can not share a single memcached_st."
/// - `deinit` only frees: a handle still open there is a leak, which fails an assertion in debug
///   builds and is freed quietly in release builds.
///
/// Related libmemcached documentation:
/// <https://awesomized.github.io/libmemcached/libmemcached/memcached_create.html>,
/// <https://awesomized.github.io/libmemcached/libmemcached/memcached_result_st.html>
final class MemcachedHandle {
    /// The handle; only this class frees it. `nil` once closed.
    private var memc: UnsafeMutablePointer<memcached_st>?
    /// Our own storage, initialised by `memcached_result_create`: a result that libmemcached
    /// allocated itself is freed by `memcached_fetch_result` when a fetch ends ("We have
    /// completed reading data": `if (memcached_is_allocated(result)) memcached_result_free(result)`,
    /// src/libmemcached/fetch.cc), so reusing one would be a double free. Its value buffer is
    /// reused by every fetch: values are copied out before the next.
    private var resultStorage: UnsafeMutablePointer<memcached_result_st>?

    private init(_ memc: UnsafeMutablePointer<memcached_st>) {
        self.memc = memc
    }

    deinit {
        if memc != nil {
            assertionFailure("leak of an open MemcachedHandle: its owner must call close() on its owner thread")
            close()
        }
    }

    /// Creates a handle from a configuration string (`memcached()` "parses the configuration
    /// string and returns a new handle, or NULL"), sets what the string cannot say and binds the
    /// result storage. No network I/O: libmemcached connects to each node on first use.
    ///
    /// - Throws: ``MemcachedError`` (``MemcachedError/Code/invalidConfiguration``, or
    ///   ``MemcachedError/Code/serverError`` when the result cannot be created).
    static func make(
        _ configurationString: String, configuration: MemcachedConfiguration
    ) throws(MemcachedError) -> MemcachedHandle {
        let memc = configurationString.withCString { memcached($0, configurationString.utf8.count) }
        guard let memc else {
            throw MemcachedError(
                code: .invalidConfiguration, message: "memcached() returned NULL for '\(configurationString)'",
                returnCode: Int32(MEMCACHED_PARSE_ERROR.rawValue))
        }
        let handle = MemcachedHandle(memc)
        if let error = handle.configure(configuration) {
            handle.close()
            throw error
        }
        return handle
    }

    private func configure(_ configuration: MemcachedConfiguration) -> MemcachedError? {
        // Not expressible in libmemcached 1.1.4's configuration language (see
        // MemcachedConfiguration.serverFailureLimit). Without REMOVE_FAILED_SERVERS, a node that
        // reaches the limit is put in timeout for RETRY_TIMEOUT seconds and stays on the ring.
        let rc = memcached_behavior_set(
            pointer, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, UInt64(configuration.serverFailureLimit))
        guard rc == MEMCACHED_SUCCESS else {
            let error = MemcachedConnection.error(rc, handle: pointer)
            return MemcachedError(code: .invalidConfiguration, message: error.message, returnCode: error.returnCode)
        }
        let storage = UnsafeMutablePointer<memcached_result_st>.allocate(capacity: 1)
        guard memcached_result_create(pointer, storage) != nil else {
            storage.deallocate()
            return MemcachedError(
                code: .serverError, message: "memcached_result_create failed",
                returnCode: Int32(MEMCACHED_MEMORY_ALLOCATION_FAILURE.rawValue))
        }
        resultStorage = storage
        return nil
    }

    /// The `memcached_st`, lent for libmemcached calls on the owner thread; never kept past ``close()``.
    var pointer: UnsafeMutablePointer<memcached_st> {
        guard let memc else { preconditionFailure("MemcachedHandle used after close()") }
        return memc
    }

    /// The result storage bound to this handle, for `memcached_fetch_result`.
    var result: UnsafeMutablePointer<memcached_result_st> {
        guard let resultStorage else { preconditionFailure("MemcachedHandle used after close()") }
        return resultStorage
    }

    /// Frees the result's value buffer and the handle (`memcached_free` closes its sockets).
    /// Calling it twice is harmless.
    func close() {
        if let resultStorage {
            // Frees the value buffer only: the struct is ours (not "allocated" by libmemcached),
            // and the buffer goes back through the handle's allocator, so before memcached_free.
            memcached_result_free(resultStorage)
            resultStorage.deallocate()
            self.resultStorage = nil
        }
        if let memc {
            memcached_free(memc)
            self.memc = nil
        }
    }
}

// Holds C pointers that must be freed exactly once, by the thread that owns them.
@available(*, unavailable)
extension MemcachedHandle: Sendable {}
