internal import CLibMemcached

/// A memcached request that did not complete, or a configuration that cannot work.
///
/// ``code`` is what callers act on; ``message`` is libmemcached's own text
/// (`memcached_last_error_message`, else `memcached_strerror`) and ``returnCode`` the raw
/// `memcached_return_t`, both for logs. Neither contains the value.
///
/// Related libmemcached documentation:
/// <https://awesomized.github.io/libmemcached/libmemcached/memcached_return_t.html>,
/// <https://awesomized.github.io/libmemcached/libmemcached/memcached_strerror.html>
public struct MemcachedError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, in the few cases a cache user acts on.
    public enum Code: Sendable, Hashable {
        /// The node did not answer within the poll (or connect) timeout (`MEMCACHED_TIMEOUT`).
        case timeout
        /// Connecting, writing or reading failed (`MEMCACHED_CONNECTION_FAILURE`,
        /// `MEMCACHED_WRITE_FAILURE`, `MEMCACHED_UNKNOWN_READ_FAILURE`, `MEMCACHED_ERRNO`, …).
        case connectionFailure
        /// The node failed recently and is skipped until the retry timeout passes
        /// (`MEMCACHED_SERVER_MARKED_DEAD`, `MEMCACHED_SERVER_TEMPORARILY_DISABLED`).
        case serverMarkedDead
        /// The key is empty, longer than 250 bytes, or holds whitespace or control characters.
        /// Detected before any network call.
        case invalidKey
        /// The server list or options cannot be used.
        case invalidConfiguration
        /// Anything else: the server answered `SERVER_ERROR`/`ERROR`, a protocol error, memory, …
        case serverError
    }

    /// What went wrong.
    public let code: Code
    /// libmemcached's message (or ours for ``Code/invalidKey`` and ``Code/invalidConfiguration``).
    public let message: String
    /// The raw `memcached_return_t` value, for logs.
    public let returnCode: Int32
    /// The node that failed, when an operation over several nodes knows it
    /// (``MemcachedConnection/get(many:)``).
    public var node: MemcachedServer?

    public init(code: Code, message: String, returnCode: Int32, node: MemcachedServer? = nil) {
        self.code = code
        self.message = message
        self.returnCode = returnCode
        self.node = node
    }

    public var description: String {
        "MemcachedError(\(code), returnCode: \(returnCode)): \(message)"
    }
}

extension MemcachedError.Code {
    /// Maps a failing `memcached_return_t`. Outcomes that are not failures (`STORED`,
    /// `NOTFOUND`, `NOTSTORED`, `DATA_EXISTS`, …) are decided by the callers before this.
    init(_ rc: memcached_return_t) {
        switch rc {
        case MEMCACHED_TIMEOUT:
            self = .timeout
        case MEMCACHED_CONNECTION_FAILURE, MEMCACHED_HOST_LOOKUP_FAILURE, MEMCACHED_CONNECTION_BIND_FAILURE,
            MEMCACHED_WRITE_FAILURE, MEMCACHED_READ_FAILURE, MEMCACHED_UNKNOWN_READ_FAILURE,
            MEMCACHED_PARTIAL_READ, MEMCACHED_ERRNO, MEMCACHED_FAIL_UNIX_SOCKET, MEMCACHED_NO_SERVERS:
            self = .connectionFailure
        case MEMCACHED_SERVER_MARKED_DEAD, MEMCACHED_SERVER_TEMPORARILY_DISABLED:
            self = .serverMarkedDead
        case MEMCACHED_BAD_KEY_PROVIDED, MEMCACHED_NO_KEY_PROVIDED, MEMCACHED_KEY_TOO_BIG:
            self = .invalidKey
        case MEMCACHED_PARSE_ERROR, MEMCACHED_PARSE_USER_ERROR, MEMCACHED_INVALID_HOST_PROTOCOL:
            self = .invalidConfiguration
        default:
            // MEMCACHED_ERROR (also MEMCACHED_CONNECTION_SOCKET_CREATE_FAILURE), SERVER_ERROR,
            // CLIENT_ERROR, PROTOCOL_ERROR, E2BIG, MEMORY_ALLOCATION_FAILURE, FAILURE, …
            self = .serverError
        }
    }
}

extension MemcachedError {
    static func invalidConfiguration(_ message: String) -> MemcachedError {
        MemcachedError(
            code: .invalidConfiguration, message: message, returnCode: Int32(MEMCACHED_INVALID_ARGUMENTS.rawValue))
    }
}
