import Glibc

/// A Server-Sent Events client over a raw loopback socket, for tests: it opens one stream, parses
/// the head and then events as they arrive, every wait bounded by a deadline (`poll`).
///
/// ```swift
/// let stream = try EventStreamTestClient(port: port, path: "/users/profile/42/events")
/// #expect(try stream.head().status == 200)
/// let event = try #require(try stream.nextEvent(within: .seconds(1)))
/// ```
public final class EventStreamTestClient {
    /// One dispatched event (SSE's `event`, `id` and joined `data` fields).
    public struct Event: Sendable, Equatable {
        public var event: String?
        public var id: String?
        public var data: String
        public var retry: String?
    }

    public struct Head: Sendable {
        public var status: Int
        public var headers: [(name: String, value: String)]
        /// The body of a non-stream answer (read to EOF), for problem documents.
        public var body: String

        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    public enum Failure: Error, Equatable {
        case connect(errno: Int32)
        case closed
        case timeout
        case malformed
    }

    public let fd: Int32
    private var buffer: [UInt8] = []
    private var parsedHead: Head?
    private var pendingFields: (event: String?, id: String?, data: [String], retry: String?) = (nil, nil, [], nil)
    /// The last `retry:` field seen.
    public private(set) var retryHint: String?
    /// Comment lines (heartbeats) seen so far.
    public private(set) var comments = 0
    public private(set) var isClosed = false

    /// Connects and sends `GET path` with `headers`.
    /// - Parameter receiveBufferBytes: `SO_RCVBUF` set before connecting (a small one makes a
    ///   reader that stops reading fill up quickly).
    public init(
        port: Int, path: String, headers: [String: String] = [:], receiveBufferBytes: Int? = nil,
        host: String = "127.0.0.1"
    ) throws {
        let connected = LoopbackSocket.connect(host: host, port: port) { fd in
            if var size = receiveBufferBytes.map(Int32.init) {
                setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            }
        }
        let fd: Int32
        switch connected {
        case .success(let descriptor): fd = descriptor
        case .failure(let failure): throw Failure.connect(errno: failure.errno)
        }
        self.fd = fd
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        let bytes = Array(request.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    deinit { close() }

    public func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
    }

    /// The response head (waiting for it up to `limit`); for an answer other than 200 also its body.
    public func head(within limit: Duration = .seconds(10)) throws -> Head {
        if let parsedHead { return parsedHead }
        let deadline = ContinuousClock.now + limit
        while true {
            if let end = Self.find([13, 10, 13, 10], in: buffer) {
                let text = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 4)
                var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
                let statusLine = lines.removeFirst().split(separator: " ")
                guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw Failure.malformed }
                let headers = lines.compactMap { line -> (name: String, value: String)? in
                    guard let colon = line.firstIndex(of: ":") else { return nil }
                    return (String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingSpaces)
                }
                var head = Head(status: status, headers: headers, body: "")
                if status != 200 {
                    let length = head.header("Content-Length").flatMap(Int.init) ?? 0
                    while buffer.count < length, try fill(until: deadline) {}
                    head.body = String(decoding: buffer.prefix(length), as: UTF8.self)
                }
                parsedHead = head
                return head
            }
            guard try fill(until: deadline) else { throw isClosed ? Failure.closed : Failure.timeout }
        }
    }

    /// The next event, or `nil` when none arrives within `limit`.
    /// - Throws: ``Failure/closed`` when the server closed the stream.
    public func nextEvent(within limit: Duration) throws -> Event? {
        _ = try head(within: limit)
        let deadline = ContinuousClock.now + limit
        while true {
            while let newline = buffer.firstIndex(of: 10) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeFirst(newline + 1)
                if let event = process(line) { return event }
            }
            guard try fill(until: deadline) else {
                if isClosed { throw Failure.closed }
                return nil
            }
        }
    }

    /// Events until `limit` passes quietly (none within it).
    public func drainEvents(quietFor limit: Duration) throws -> [Event] {
        var events: [Event] = []
        while let event = try nextEvent(within: limit) { events.append(event) }
        return events
    }

    /// Reads (and drops) everything until the server closes; true if it did within `limit`.
    public func waitForClose(within limit: Duration) -> Bool {
        let deadline = ContinuousClock.now + limit
        while !isClosed {
            buffer.removeAll(keepingCapacity: true)
            guard (try? fill(until: deadline)) == true else { return isClosed }
        }
        return true
    }

    /// One SSE line; returns an event when the line dispatches one.
    private func process(_ line: String) -> Event? {
        if line.isEmpty {
            defer { pendingFields = (nil, nil, [], nil) }
            if let retry = pendingFields.retry { retryHint = retry }
            if pendingFields.data.isEmpty { return nil }
            return Event(
                event: pendingFields.event, id: pendingFields.id, data: pendingFields.data.joined(separator: "\n"),
                retry: pendingFields.retry)
        }
        if line.hasPrefix(":") {
            comments += 1
            return nil
        }
        let name: Substring
        var value: Substring
        if let colon = line.firstIndex(of: ":") {
            name = line[..<colon]
            value = line[line.index(after: colon)...]
            if value.hasPrefix(" ") { value = value.dropFirst() }
        } else {
            name = Substring(line)
            value = ""
        }
        switch name {
        case "event": pendingFields.event = String(value)
        case "id": pendingFields.id = String(value)
        case "data": pendingFields.data.append(String(value))
        case "retry": pendingFields.retry = String(value)
        default: break
        }
        return nil
    }

    /// Reads what arrives before `deadline`; false on timeout or EOF (then ``isClosed``).
    private func fill(until deadline: ContinuousClock.Instant) throws -> Bool {
        guard !isClosed else { return false }
        let remaining = deadline - ContinuousClock.now
        let (seconds, attoseconds) = remaining.components
        let milliseconds = max(0, Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000))
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, milliseconds)
        guard ready > 0 else { return false }
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count <= 0 {
            close()
            return false
        }
        buffer.append(contentsOf: chunk[..<count])
        return true
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start..<(start + needle.count)].elementsEqual(needle) {
            return start
        }
        return nil
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
