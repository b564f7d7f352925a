/// A complete request: head and body.
public struct HTTPRequest: Sendable {
    public var method: HTTPMethod
    /// The request target as sent (origin-form `/a?b`, absolute-form `http://h/a?b`, or `*`).
    public var target: String
    /// The path of ``target`` without the query; for absolute-form targets, the path part (`/` if empty).
    public var path: String
    /// The raw query after the first `?`, or `nil` when the target has none.
    public var query: String?
    public var version: HTTPVersion
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// The address of the socket's peer (`127.0.0.1`, `::1`), set by the server: the client, or
    /// the gateway in front of it. `nil` when unknown (a request built in a test).
    public var peerAddress: String?

    /// Creates a request; ``path`` and ``query`` are derived from `target`.
    public init(
        method: HTTPMethod, target: String, version: HTTPVersion = .http1_1, headers: HTTPHeaders = [:],
        body: [UInt8] = []
    ) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.body = body
        (self.path, self.query) = Self.split(target: target)
    }

    /// Creates a request from a target split already (``split(target:)``): the parser splits
    /// each target once, for the head it reports and the request it completes.
    init(
        method: HTTPMethod, target: String, split: (path: String, query: String?), version: HTTPVersion,
        headers: HTTPHeaders, body: [UInt8]
    ) {
        self.method = method
        self.target = target
        (self.path, self.query) = split
        self.version = version
        self.headers = headers
        self.body = body
    }

    /// The first value of `name` in the query (`name=value` pairs separated by `&`), percent-decoded
    /// (`+` decodes to a space); `""` for a bare `name`; `nil` when absent.
    public func queryValue(for name: String) -> String? {
        guard let query else { return nil }
        for pair in query.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = pair.firstIndex(of: UInt8(ascii: "="))
            let rawName = pair[pair.startIndex..<(equals ?? pair.endIndex)]
            guard Self.percentDecoded(rawName) == name else { continue }
            guard let equals else { return "" }
            return Self.percentDecoded(pair[pair.index(after: equals)...])
        }
        return nil
    }

    static func split(target: String) -> (path: String, query: String?) {
        let utf8 = target.utf8
        var pathStart = utf8.startIndex
        if utf8.first != UInt8(ascii: "/"), let scheme = Self.schemeEnd(utf8) {
            // absolute-form: skip "scheme://authority"
            let authorityStart = scheme
            pathStart =
                utf8[authorityStart...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }
                ?? utf8.endIndex
        }
        let queryMark = utf8[pathStart...].firstIndex(of: UInt8(ascii: "?"))
        var path = String(decoding: utf8[pathStart..<(queryMark ?? utf8.endIndex)], as: UTF8.self)
        if path.isEmpty { path = "/" }
        let query = queryMark.map { String(decoding: utf8[utf8.index(after: $0)...], as: UTF8.self) }
        return (path, query)
    }

    /// The index just past `://` when `utf8` starts with `scheme://`.
    private static func schemeEnd(_ utf8: String.UTF8View) -> String.UTF8View.Index? {
        var index = utf8.startIndex
        while index < utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: ":") {
                let rest = utf8[utf8.index(after: index)...]
                guard index > utf8.startIndex, rest.starts(with: "//".utf8) else { return nil }
                return utf8.index(index, offsetBy: 3)
            }
            let isSchemeByte =
                (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            guard isSchemeByte else { return nil }
            index = utf8.index(after: index)
        }
        return nil
    }

    static func percentDecoded<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        percentDecoded(Array(bytes))
    }

    static func percentDecoded(_ bytes: [UInt8]) -> String {
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case 0x30...0x39: return byte - 0x30
            case 0x41...0x46: return byte - 0x41 + 10
            case 0x61...0x66: return byte - 0x61 + 10
            default: return nil
            }
        }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%"), index + 2 < bytes.count,
                let high = hex(bytes[index + 1]), let low = hex(bytes[index + 2])
            {
                output.append(high << 4 | low)
                index += 3
            } else {
                output.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
