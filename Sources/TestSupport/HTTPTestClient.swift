import Glibc

/// A raw, blocking HTTP/1.1 client over a loopback TCP socket, for tests that need exact bytes on the
/// wire: pipelining, dripping, malformed requests, interim responses.
///
/// Every read waits at most `timeout` (`SO_RCVTIMEO`), so a broken server fails a test instead of
/// hanging it.
public final class HTTPTestClient {
    public enum Failure: Error, Equatable {
        case connect(errno: Int32)
        case send(errno: Int32)
        case timeout
        case closed
        case malformed(String)
    }

    /// A parsed response.
    public struct Response: Sendable {
        public var status: Int
        public var reason: String
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]

        /// The first value of `name`, case-insensitively.
        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        public var bodyText: String { String(decoding: body, as: UTF8.self) }
    }

    private let fd: Int32
    private var buffer: [UInt8] = []
    private var isClosed = false

    /// Connects to `host:port`.
    public init(port: Int, host: String = "127.0.0.1", timeout: Duration = .seconds(10)) throws {
        let fd: Int32
        switch LoopbackSocket.connect(host: host, port: port) {
        case .success(let connected): fd = connected
        case .failure(let failure): throw Failure.connect(errno: failure.errno)
        }
        let (seconds, attoseconds) = timeout.components
        var interval = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        self.fd = fd
    }

    deinit { close() }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Writes all of `bytes` (`MSG_NOSIGNAL`: a closed peer throws instead of killing the test).
    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written < 0 {
                if errno == EINTR { continue }
                throw Failure.send(errno: errno)
            }
            offset += written
        }
    }

    /// Half-closes the connection (FIN); responses can still be read.
    public func shutdownWrite() { Glibc.shutdown(fd, Int32(SHUT_WR)) }

    /// Aborts the connection: the server sees a reset (`EPOLLERR`/`EPOLLHUP`), not a FIN.
    public func reset() {
        guard !isClosed else { return }
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close()
    }

    public func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
    }

    /// Reads one response. Interim (1xx) responses are returned like final ones.
    /// - Parameter toHead: true when the request was HEAD: the response has no body.
    public func readResponse(toHead: Bool = false) throws -> Response {
        let headEnd = try readUntil(Array("\r\n\r\n".utf8))
        let head = String(decoding: buffer[0..<headEnd], as: UTF8.self)
        buffer.removeFirst(headEnd + 4)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let statusLine = lines.removeFirst().split(separator: " ", maxSplits: 2).map(String.init)
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]) else {
            throw Failure.malformed(head)
        }
        var response = Response(
            status: status, reason: statusLine.count > 2 ? statusLine[2] : "", headers: [], body: [])
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw Failure.malformed(line) }
            response.headers.append(
                (String(line[..<colon]), String(line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" })))
        }
        if toHead || status < 200 || status == 204 || status == 304 { return response }
        if let length = response.header("Content-Length").flatMap(Int.init) {
            try fill(length)
            response.body = Array(buffer[0..<length])
            buffer.removeFirst(length)
        } else {
            response.body = try readToEnd()
        }
        return response
    }

    /// Reads until the server closes; returns everything not yet consumed.
    public func readToEnd() throws -> [UInt8] {
        while try receive() {}
        defer { buffer.removeAll() }
        return buffer
    }

    /// True when the server has closed the connection (EOF or reset) and sent nothing more.
    public func isClosedByServer() -> Bool {
        do {
            return try readToEnd().isEmpty
        } catch Failure.closed {
            return true
        } catch {
            return false
        }
    }

    /// Whether bytes or an EOF are ready to read right now, without blocking.
    public func hasInput() -> Bool {
        guard buffer.isEmpty else { return true }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) > 0
    }

    // MARK: - Buffer

    private func readUntil(_ marker: [UInt8]) throws -> Int {
        var searchFrom = 0
        while true {
            if buffer.count >= marker.count {
                for start in searchFrom...(buffer.count - marker.count)
                where buffer[start..<(start + marker.count)].elementsEqual(marker) {
                    return start
                }
                searchFrom = buffer.count - marker.count + 1
            }
            guard try receive() else { throw Failure.closed }
        }
    }

    private func fill(_ count: Int) throws {
        while buffer.count < count {
            guard try receive() else { throw Failure.closed }
        }
    }

    /// Reads once into the buffer; false on EOF.
    private func receive() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer.append(contentsOf: chunk[0..<count])
                return true
            }
            if count == 0 { return false }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: throw Failure.timeout
            case ECONNRESET: throw Failure.closed
            default: throw Failure.malformed("recv errno \(errno)")
            }
        }
    }
}
