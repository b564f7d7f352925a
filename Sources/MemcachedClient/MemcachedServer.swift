/// One memcached node of the cluster, as `host:port`.
///
/// Values come from ``MemcachedConfiguration/init(servers:connectTimeout:pollTimeout:retryTimeout:serverFailureLimit:)``
/// and from ``MemcachedConnection/server(forKey:)``.
public struct MemcachedServer: Sendable, Hashable, CustomStringConvertible {
    /// The host name or address, as written in the server list.
    public let host: String
    /// The TCP port, 1...65535.
    public let port: Int

    /// Creates a server value. No validation: use ``MemcachedConfiguration`` to parse a list.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `host:port`.
    public var description: String { "\(host):\(port)" }
}
