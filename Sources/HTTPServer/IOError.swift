#if canImport(Glibc)
    import Glibc
#endif

/// A failed system call: its `errno` and what the server was doing.
public struct IOError: Error, CustomStringConvertible, Sendable {
    public let errnoCode: Int32
    public let reason: String

    public init(errnoCode: Int32, reason: String) {
        self.errnoCode = errnoCode
        self.reason = reason
    }

    public var description: String {
        "\(reason): \(String(cString: strerror(errnoCode))) (errno \(errnoCode))"
    }
}

/// The outcome of a non-blocking call: done, or it would have blocked.
enum IOResult<Value> {
    case processed(Value)
    case wouldBlock
}
