/// An incremental, strict HTTP/1.1 request parser (RFC 9112).
///
/// Feed it bytes in any split — one byte at a time or a whole pipeline at once. Each call to
/// ``parse(_:)`` consumes bytes up to the end of at most one request and reports what happened;
/// bytes after a complete request are left unconsumed, so pipelined requests are handled in order
/// and none is lost. Any framing or limit violation throws an ``HTTPParserError`` carrying the status
/// to answer; the parser then stays failed and the connection must be closed.
///
/// ```swift
/// var parser = HTTPRequestParser(limits: .init())
/// let (consumed, event) = try parser.parse(bytes)
/// if case .request(let request, let keepAlive) = event { ... }
/// ```
public struct HTTPRequestParser: Sendable {
    /// Size limits; each violation has its own status (414, 431, 413).
    public struct Limits: Sendable, Hashable {
        /// Longest request line, without its CRLF (414).
        public var maxRequestLineBytes: Int
        /// Largest header block: the field lines with their CRLFs (431). Also bounds chunked trailers.
        public var maxHeaderBytes: Int
        /// Most header fields (431). Also bounds chunked trailer fields.
        public var maxHeaderCount: Int
        /// Largest body (413), checked against `Content-Length` before any body byte is read.
        public var maxBodyBytes: Int

        public init(
            maxRequestLineBytes: Int = 32 * 1024, maxHeaderBytes: Int = 16 * 1024, maxHeaderCount: Int = 100,
            maxBodyBytes: Int = 64 * 1024
        ) {
            self.maxRequestLineBytes = maxRequestLineBytes
            self.maxHeaderBytes = maxHeaderBytes
            self.maxHeaderCount = maxHeaderCount
            self.maxBodyBytes = maxBodyBytes
        }
    }

    /// What a call to ``parse(_:)`` produced.
    public enum Event: Sendable {
        /// All given bytes were consumed and no request is complete yet.
        case needMoreData
        /// The head is complete and a body follows. `expectsContinue` is true when an HTTP/1.1 client
        /// sent `Expect: 100-continue`: answer `100 Continue` before waiting for the body.
        case head(expectsContinue: Bool)
        /// A complete request. `keepAlive` is false when the connection must close after the response
        /// (`Connection: close`, or HTTP/1.0 without `Connection: keep-alive`).
        case request(HTTPRequest, keepAlive: Bool)
    }

    private enum State: Sendable {
        case requestLine
        case headerLines
        case fixedBody(remaining: Int)
        case chunkSizeLine
        case chunkData(remaining: Int)
        case chunkDataCR
        case chunkDataLF
        case trailerLines
        case failed(HTTPParserError)
    }

    /// Longest chunk-size line with its extensions.
    static let maxChunkLineBytes = 1024
    /// Empty lines tolerated before a request line (RFC 9112 §2.2 allows at least one).
    static let maxLeadingEmptyLines = 8

    public let limits: Limits
    private var state: State = .requestLine
    private var line: [UInt8] = []
    private var sawCR = false
    private var leadingEmptyLines = 0

    private var method: HTTPMethod = .get
    private var target = ""
    /// ``target``'s path and query, split once when the request line is read.
    private var targetSplit: (path: String, query: String?) = ("/", nil)
    private var version: HTTPVersion = .http1_1
    private var headers = HTTPHeaders()
    private var headerBytes = 0
    private var contentLengthCount = 0
    private var contentLength = 0
    private var transferEncoding: [UInt8] = []
    private var hasTransferEncoding = false
    private var hostCount = 0
    private var connectionClose = false
    private var connectionKeepAlive = false
    private var expectContinue = false
    private var body: [UInt8] = []
    private var trailerBytes = 0
    private var trailerCount = 0

    public init(limits: Limits = Limits()) {
        self.limits = limits
        line.reserveCapacity(256)
    }

    /// True when no byte of a next request has been consumed yet.
    public var isIdle: Bool {
        if case .requestLine = state { return line.isEmpty && !sawCR && leadingEmptyLines == 0 }
        return false
    }

    /// Parses `bytes` from the start; see ``parse(_:)-(UnsafeBufferPointer<UInt8>)``.
    public mutating func parse(_ bytes: [UInt8]) throws(HTTPParserError) -> (consumed: Int, event: Event) {
        try bytes.withUnsafeBufferPointer { buffer throws(HTTPParserError) in try parse(buffer) }
    }

    /// Consumes bytes from the start of `input` up to the end of at most one request.
    /// - Returns: how many bytes were consumed and the resulting event.
    /// - Throws: ``HTTPParserError`` on any framing error or exceeded limit; later calls rethrow it.
    public mutating func parse(
        _ input: UnsafeBufferPointer<UInt8>
    ) throws(HTTPParserError) -> (consumed: Int, event: Event) {
        if case .failed(let error) = state { throw error }
        var index = 0
        do throws(HTTPParserError) {
            while true {
                switch state {
                case .failed(let error):
                    throw error

                case .requestLine:
                    guard
                        try readLine(
                            input, &index, limit: limits.maxRequestLineBytes,
                            overflow: HTTPParserError(
                                code: .requestLineTooLong, status: .uriTooLong, detail: "request line too long"))
                    else { return (index, .needMoreData) }
                    if line.isEmpty {
                        leadingEmptyLines += 1
                        guard leadingEmptyLines <= Self.maxLeadingEmptyLines else {
                            throw .badRequest(.invalidRequestLine, "too many empty lines before the request line")
                        }
                        continue
                    }
                    try parseRequestLine()
                    line.removeAll(keepingCapacity: true)
                    state = .headerLines

                case .headerLines:
                    guard
                        try readLine(
                            input, &index, limit: max(limits.maxHeaderBytes - headerBytes - 2, 0),
                            overflow: HTTPParserError(
                                code: .headerBlockTooLarge, status: .requestHeaderFieldsTooLarge,
                                detail: "header block too large"))
                    else { return (index, .needMoreData) }
                    if line.isEmpty {
                        if let event = try finishHead() { return (index, event) }
                        continue
                    }
                    headerBytes += line.count + 2
                    try parseHeaderLine()
                    line.removeAll(keepingCapacity: true)

                case .fixedBody(let remaining):
                    let count = min(remaining, input.count - index)
                    body.append(contentsOf: UnsafeBufferPointer(rebasing: input[index..<(index + count)]))
                    index += count
                    if count == remaining { return (index, finishRequest()) }
                    state = .fixedBody(remaining: remaining - count)
                    return (index, .needMoreData)

                case .chunkSizeLine:
                    guard
                        try readLine(
                            input, &index, limit: Self.maxChunkLineBytes,
                            overflow: .badRequest(.invalidChunkSize, "chunk-size line too long"))
                    else { return (index, .needMoreData) }
                    let size = try parseChunkSizeLine()
                    line.removeAll(keepingCapacity: true)
                    state = size == 0 ? .trailerLines : .chunkData(remaining: size)

                case .chunkData(let remaining):
                    let count = min(remaining, input.count - index)
                    body.append(contentsOf: UnsafeBufferPointer(rebasing: input[index..<(index + count)]))
                    index += count
                    if count < remaining {
                        state = .chunkData(remaining: remaining - count)
                        return (index, .needMoreData)
                    }
                    state = .chunkDataCR

                case .chunkDataCR, .chunkDataLF:
                    guard index < input.count else { return (index, .needMoreData) }
                    let expected = if case .chunkDataCR = state { HTTPSyntax.cr } else { HTTPSyntax.lf }
                    guard input[index] == expected else {
                        throw .badRequest(.invalidChunkTerminator, "chunk data not followed by CRLF")
                    }
                    index += 1
                    state = expected == HTTPSyntax.cr ? .chunkDataLF : .chunkSizeLine

                case .trailerLines:
                    guard
                        try readLine(
                            input, &index, limit: max(limits.maxHeaderBytes - trailerBytes - 2, 0),
                            overflow: HTTPParserError(
                                code: .trailersTooLarge, status: .requestHeaderFieldsTooLarge,
                                detail: "trailer section too large"))
                    else { return (index, .needMoreData) }
                    if line.isEmpty { return (index, finishRequest()) }
                    trailerBytes += line.count + 2
                    trailerCount += 1
                    guard trailerCount <= limits.maxHeaderCount else {
                        throw HTTPParserError(
                            code: .trailersTooLarge, status: .requestHeaderFieldsTooLarge,
                            detail: "too many trailer fields")
                    }
                    try line.withUnsafeBufferPointer { bytes throws(HTTPParserError) in
                        _ = try Self.splitFieldLine(bytes)
                    }
                    line.removeAll(keepingCapacity: true)
                }
            }
        } catch {
            state = .failed(error)
            throw error
        }
    }

    // MARK: - Lines

    /// Appends bytes to `line` until a CRLF; true when `line` holds a complete line (without CRLF).
    /// A CR not followed by LF, or an LF without CR, is an error (RFC 9112 §2.2: no bare CR).
    private mutating func readLine(
        _ input: UnsafeBufferPointer<UInt8>, _ index: inout Int, limit: Int, overflow: HTTPParserError
    ) throws(HTTPParserError) -> Bool {
        while index < input.count {
            if sawCR {
                guard input[index] == HTTPSyntax.lf else { throw .badRequest(.bareCR, "bare CR in request") }
                sawCR = false
                index += 1
                return true
            }
            var end = index
            while end < input.count, input[end] != HTTPSyntax.cr, input[end] != HTTPSyntax.lf { end += 1 }
            if end > index {
                guard line.count + (end - index) <= limit else { throw overflow }
                line.append(contentsOf: UnsafeBufferPointer(rebasing: input[index..<end]))
                index = end
                continue
            }
            guard input[index] == HTTPSyntax.cr else { throw .badRequest(.bareLF, "bare LF in request") }
            sawCR = true
            index += 1
        }
        return false
    }

    // MARK: - Head

    private mutating func parseRequestLine() throws(HTTPParserError) {
        let (method, target, version) = try line.withUnsafeBufferPointer {
            bytes throws(HTTPParserError) -> (HTTPMethod, String, HTTPVersion) in
            guard let firstSpace = bytes.firstIndex(of: HTTPSyntax.space) else {
                throw .badRequest(.invalidRequestLine, "malformed request line")
            }
            guard let method = HTTPMethod.parse(UnsafeBufferPointer(rebasing: bytes[0..<firstSpace])) else {
                throw .badRequest(.invalidMethod, "invalid method token")
            }
            let afterMethod = firstSpace + 1
            guard
                let secondSpace = bytes[afterMethod...].firstIndex(of: HTTPSyntax.space), secondSpace > afterMethod
            else { throw .badRequest(.invalidRequestLine, "malformed request line") }
            let targetBytes = UnsafeBufferPointer(rebasing: bytes[afterMethod..<secondSpace])
            let versionBytes = UnsafeBufferPointer(rebasing: bytes[(secondSpace + 1)...])
            guard !versionBytes.contains(HTTPSyntax.space) else {
                throw .badRequest(.invalidRequestLine, "malformed request line")
            }
            let version = try Self.parseVersion(versionBytes)
            guard targetBytes.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E && $0 != UInt8(ascii: "#") }) else {
                throw .badRequest(.invalidTarget, "invalid request target")
            }
            switch targetBytes[0] {
            case UInt8(ascii: "/"):
                break
            case UInt8(ascii: "*") where targetBytes.count == 1 && method == .options:
                break
            default:
                let isAbsolute =
                    HTTPSyntax.equalsIgnoringCase(targetBytes.prefix(7), "http://".utf8)
                    || HTTPSyntax.equalsIgnoringCase(targetBytes.prefix(8), "https://".utf8)
                guard isAbsolute else { throw .badRequest(.invalidTarget, "invalid request target") }
            }
            return (method, String(decoding: targetBytes, as: UTF8.self), version)
        }
        self.method = method
        self.target = target
        self.targetSplit = HTTPRequest.split(target: target)
        self.version = version
    }

    private static func parseVersion(_ bytes: UnsafeBufferPointer<UInt8>) throws(HTTPParserError) -> HTTPVersion {
        func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
        guard bytes.count == 8, bytes.prefix(5).elementsEqual("HTTP/".utf8), isDigit(bytes[5]),
            bytes[6] == UInt8(ascii: "."), isDigit(bytes[7])
        else { throw .badRequest(.invalidVersion, "invalid HTTP version") }
        let version = HTTPVersion(major: Int(bytes[5] - 0x30), minor: Int(bytes[7] - 0x30))
        guard version.major == 1 else {
            throw HTTPParserError(
                code: .unsupportedVersion, status: .httpVersionNotSupported, detail: "only HTTP/1.x is supported")
        }
        return version
    }

    /// Checks a field line (RFC 9112 §5) and returns the ranges of its name and trimmed value.
    private static func splitFieldLine(
        _ bytes: UnsafeBufferPointer<UInt8>
    ) throws(HTTPParserError) -> (name: Range<Int>, value: Range<Int>) {
        guard !HTTPSyntax.isWhitespace(bytes[0]) else {
            throw .badRequest(.obsoleteLineFolding, "obsolete line folding")
        }
        guard let colon = bytes.firstIndex(of: HTTPSyntax.colon) else {
            throw .badRequest(.missingColon, "header line without a colon")
        }
        guard colon > 0 else { throw .badRequest(.invalidHeaderName, "empty header name") }
        guard !HTTPSyntax.isWhitespace(bytes[colon - 1]) else {
            throw .badRequest(.whitespaceBeforeColon, "whitespace between header name and colon")
        }
        for index in 0..<colon where !HTTPSyntax.isTokenByte(bytes[index]) {
            throw .badRequest(.invalidHeaderName, "invalid header name")
        }
        var start = colon + 1
        var end = bytes.count
        while start < end, HTTPSyntax.isWhitespace(bytes[start]) { start += 1 }
        while end > start, HTTPSyntax.isWhitespace(bytes[end - 1]) { end -= 1 }
        for index in start..<end where !HTTPSyntax.isFieldValueByte(bytes[index]) {
            throw .badRequest(.invalidHeaderValue, "invalid byte in header value")
        }
        return (0..<colon, start..<end)
    }

    private mutating func parseHeaderLine() throws(HTTPParserError) {
        guard headers.count < limits.maxHeaderCount else {
            throw HTTPParserError(
                code: .tooManyHeaders, status: .requestHeaderFieldsTooLarge, detail: "too many header fields")
        }
        let line = self.line
        try line.withUnsafeBufferPointer { bytes throws(HTTPParserError) in
            let (nameRange, valueRange) = try Self.splitFieldLine(bytes)
            let name = UnsafeBufferPointer(rebasing: bytes[nameRange])
            let value = UnsafeBufferPointer(rebasing: bytes[valueRange])
            try noteFramingField(name: name, value: value)
            headers.add(
                name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
        }
    }

    /// Records the fields that decide framing and connection handling.
    private mutating func noteFramingField(
        name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>
    ) throws(HTTPParserError) {
        switch name.count {
        case 14 where HTTPSyntax.equalsIgnoringCase(name, "content-length".utf8):
            contentLengthCount += 1
            guard contentLengthCount == 1 else {
                throw .badRequest(.duplicateContentLength, "more than one Content-Length")
            }
            guard !value.isEmpty, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                throw .badRequest(.invalidContentLength, "malformed Content-Length")
            }
            var length = 0
            for digit in value {
                length = length * 10 + Int(digit - 0x30)
                if length > limits.maxBodyBytes {  // larger values are all 413; avoids overflow
                    length = limits.maxBodyBytes + 1
                    break
                }
            }
            contentLength = length
        case 17 where HTTPSyntax.equalsIgnoringCase(name, "transfer-encoding".utf8):
            if hasTransferEncoding { transferEncoding.append(UInt8(ascii: ",")) }
            hasTransferEncoding = true
            transferEncoding.append(contentsOf: value)
        case 4 where HTTPSyntax.equalsIgnoringCase(name, "host".utf8):
            hostCount += 1
        case 10 where HTTPSyntax.equalsIgnoringCase(name, "connection".utf8):
            for option in value.split(separator: UInt8(ascii: ",")) {
                let token = HTTPSyntax.trimmed(UnsafeBufferPointer(rebasing: option))
                if HTTPSyntax.equalsIgnoringCase(token, "close".utf8) { connectionClose = true }
                if HTTPSyntax.equalsIgnoringCase(token, "keep-alive".utf8) { connectionKeepAlive = true }
            }
        case 6 where HTTPSyntax.equalsIgnoringCase(name, "expect".utf8):
            if HTTPSyntax.equalsIgnoringCase(value, "100-continue".utf8) { expectContinue = true }
        default:
            break
        }
    }

    /// Applies the framing rules of RFC 9112 §6 once the head is complete.
    /// - Returns: the event to report, or `nil` to keep parsing (never, today).
    private mutating func finishHead() throws(HTTPParserError) -> Event? {
        if hostCount > 1 { throw .badRequest(.duplicateHost, "more than one Host") }
        if version.isAtLeast1_1, hostCount == 0 { throw .badRequest(.missingHost, "Host is required in HTTP/1.1") }
        if hasTransferEncoding {
            guard contentLengthCount == 0 else {
                throw .badRequest(
                    .contentLengthWithTransferEncoding, "Content-Length together with Transfer-Encoding")
            }
            guard version.isAtLeast1_1 else {
                throw .badRequest(.invalidTransferEncoding, "Transfer-Encoding in an HTTP/1.0 request")
            }
            let codings = transferEncoding.split(separator: UInt8(ascii: ",")).compactMap { coding in
                coding.withUnsafeBufferPointer { bytes in
                    let trimmed = HTTPSyntax.trimmed(bytes)
                    return trimmed.isEmpty ? nil : Array(trimmed)
                }
            }
            func isChunked(_ coding: [UInt8]) -> Bool { HTTPSyntax.equalsIgnoringCase(coding, "chunked".utf8) }
            guard let last = codings.last, isChunked(last), !codings.dropLast().contains(where: isChunked) else {
                throw .badRequest(.invalidTransferEncoding, "chunked must be the single final transfer coding")
            }
            guard codings.count == 1 else {
                throw HTTPParserError(
                    code: .unsupportedTransferEncoding, status: .notImplemented,
                    detail: "transfer codings other than chunked are not supported")
            }
            state = .chunkSizeLine
            return .head(expectsContinue: expectContinue && version.isAtLeast1_1)
        }
        if contentLength > limits.maxBodyBytes {
            throw HTTPParserError(code: .bodyTooLarge, status: .contentTooLarge, detail: "request body too large")
        }
        if contentLength == 0 { return finishRequest() }
        body.reserveCapacity(contentLength)
        state = .fixedBody(remaining: contentLength)
        return .head(expectsContinue: expectContinue && version.isAtLeast1_1)
    }

    // MARK: - Chunked body

    private func parseChunkSizeLine() throws(HTTPParserError) -> Int {
        let maxBody = limits.maxBodyBytes
        let received = body.count
        return try line.withUnsafeBufferPointer { bytes throws(HTTPParserError) -> Int in
            var size = 0
            var index = 0
            while index < bytes.count, let digit = Self.hexValue(bytes[index]) {
                size = size * 16 + Int(digit)
                if received + size > maxBody {
                    throw HTTPParserError(
                        code: .bodyTooLarge, status: .contentTooLarge, detail: "request body too large")
                }
                index += 1
            }
            guard index > 0 else { throw .badRequest(.invalidChunkSize, "invalid chunk size") }
            // chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] ), ignored.
            while index < bytes.count, HTTPSyntax.isWhitespace(bytes[index]) { index += 1 }
            if index < bytes.count {
                guard bytes[index] == UInt8(ascii: ";"),
                    bytes[index...].allSatisfy(HTTPSyntax.isFieldValueByte)
                else { throw .badRequest(.invalidChunkSize, "invalid chunk size") }
            }
            return size
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }

    // MARK: - Completion

    /// The request whose body is being read — after a ``Event/head(expectsContinue:)`` and before
    /// its ``Event/request(_:keepAlive:)`` — without the body, so a server can refuse it (401,
    /// 403) before it reads the body or answers `100 Continue`.
    public var headOfCurrentRequest: HTTPRequest {
        HTTPRequest(method: method, target: target, split: targetSplit, version: version, headers: headers, body: [])
    }

    private mutating func finishRequest() -> Event {
        let request = HTTPRequest(
            method: method, target: target, split: targetSplit, version: version, headers: headers, body: body)
        let keepAlive = version.isAtLeast1_1 ? !connectionClose : (connectionKeepAlive && !connectionClose)
        state = .requestLine
        line.removeAll(keepingCapacity: true)
        leadingEmptyLines = 0
        headers = HTTPHeaders()
        headerBytes = 0
        contentLengthCount = 0
        contentLength = 0
        transferEncoding.removeAll(keepingCapacity: true)
        hasTransferEncoding = false
        hostCount = 0
        connectionClose = false
        connectionKeepAlive = false
        expectContinue = false
        body = []
        trailerBytes = 0
        trailerCount = 0
        return .request(request, keepAlive: keepAlive)
    }
}
