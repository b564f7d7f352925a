/// An HTTP protocol version, `HTTP/<major>.<minor>`.
public struct HTTPVersion: Hashable, Sendable, CustomStringConvertible {
    public var major: Int
    public var minor: Int

    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)

    public var description: String { "HTTP/\(major).\(minor)" }

    /// True for HTTP/1.1 and any later 1.x minor version (RFC 9110 §2.5: a higher minor is compatible).
    var isAtLeast1_1: Bool { major > 1 || (major == 1 && minor >= 1) }
}
