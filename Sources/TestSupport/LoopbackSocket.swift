import Glibc

/// Opens test clients' TCP connections.
enum LoopbackSocket {
    /// A blocking TCP socket connected to `host:port`; `configure` runs before `connect` (socket
    /// options such as `SO_RCVBUF` must be set then).
    /// - Returns: the descriptor, or the `errno` of the failed `socket` or `connect`.
    static func connect(host: String, port: Int, configure: (Int32) -> Void = { _ in }) -> Result<Int32, ConnectFailure> {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return .failure(ConnectFailure(errno: errno)) }
        configure(fd)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(fd)
            return .failure(ConnectFailure(errno: code))
        }
        return .success(fd)
    }

    struct ConnectFailure: Error {
        var errno: Int32
    }
}
