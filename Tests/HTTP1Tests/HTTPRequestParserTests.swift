import HTTP1
import Testing

@Suite struct HTTPRequestParserTests {
    @Test(arguments: [false, true])
    func parsesSimpleGet(byteByByte: Bool) throws {
        let run = runParser(
            bytes("GET /profiles/42?fields=name&x=%41+b HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n"),
            byteByByte: byteByByte)
        #expect(run.error == nil)
        let (request, keepAlive) = try #require(run.requests.first)
        #expect(run.requests.count == 1)
        #expect(request.method == .get)
        #expect(request.target == "/profiles/42?fields=name&x=%41+b")
        #expect(request.path == "/profiles/42")
        #expect(request.query == "fields=name&x=%41+b")
        #expect(request.queryValue(for: "x") == "A b")
        #expect(request.queryValue(for: "fields") == "name")
        #expect(request.queryValue(for: "missing") == nil)
        #expect(request.version == .http1_1)
        #expect(request.headers["host"] == "example.com")
        #expect(request.headers.count == 2)
        #expect(request.body.isEmpty)
        #expect(keepAlive)
        #expect(run.heads == 0)
    }

    @Test(arguments: [false, true])
    func pipelinedRequestsComeOutInOrder(byteByByte: Bool) {
        let input = bytes(
            "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"
                + "POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
                + "GET /3 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        let run = runParser(input, byteByByte: byteByByte)
        #expect(run.error == nil)
        #expect(run.requests.map(\.request.path) == ["/1", "/2", "/3"])
        #expect(run.requests.map(\.keepAlive) == [true, true, false])
        #expect(run.requests.count == 3 && run.requests[1].request.body == bytes("hello"))
        #expect(run.consumed == input.count)
    }

    @Test func stopsAtTheEndOfOneRequest() throws {
        var parser = HTTPRequestParser()
        let first = bytes("GET /1 HTTP/1.1\r\nHost: a\r\n\r\n")
        let (consumed, event) = try parser.parse(first + bytes("GET /2"))
        #expect(consumed == first.count)
        guard case .request(let request, _) = event else {
            Issue.record("expected a request, got \(event)")
            return
        }
        #expect(request.path == "/1")
    }

    @Test(arguments: [false, true])
    func contentLengthBody(byteByByte: Bool) throws {
        let run = runParser(
            bytes("PUT /p HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world"), byteByByte: byteByByte)
        let request = try #require(run.requests.first?.request)
        #expect(request.method == .put)
        #expect(request.body == bytes("hello world"))
        #expect(run.heads == 1)
    }

    @Test(arguments: [false, true])
    func chunkedBodyWithExtensionsAndTrailers(byteByByte: Bool) throws {
        let input = bytes(
            "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "5;name=value\r\nhello\r\n" + "1 \r\n \r\n" + "A\r\n0123456789\r\n" + "0\r\nX-Trailer: yes\r\n\r\n")
        let run = runParser(input, byteByByte: byteByByte)
        #expect(run.error == nil)
        let request = try #require(run.requests.first?.request)
        #expect(request.body == bytes("hello 0123456789"))
        #expect(run.consumed == input.count)
    }

    @Test(arguments: [false, true])
    func transferEncodingIsCaseInsensitive(byteByByte: Bool) {
        let run = runParser(
            bytes("POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n"), byteByByte: byteByByte)
        #expect(run.error == nil)
        #expect(run.requests.count == 1)
    }

    @Test(arguments: [false, true])
    func expectContinueIsReportedAfterTheHead(byteByByte: Bool) {
        let head = bytes("POST /p HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
        let headOnly = runParser(head, byteByByte: byteByByte)
        #expect(headOnly.continueRequests == 1)
        #expect(headOnly.requests.isEmpty)
        let full = runParser(head + bytes("abc"), byteByByte: byteByByte)
        #expect(full.requests.first?.request.body == bytes("abc"))
    }

    @Test(arguments: [false, true])
    func expectContinueIgnoredForHTTP10(byteByByte: Bool) {
        let run = runParser(
            bytes("POST /p HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx"), byteByByte: byteByByte)
        #expect(run.continueRequests == 0)
        #expect(run.requests.count == 1)
    }

    @Test(arguments: [false, true])
    func keepAliveRules(byteByByte: Bool) {
        func keepAlive(_ text: String) -> Bool? {
            runParser(bytes(text), byteByByte: byteByByte).requests.first?.keepAlive
        }
        #expect(keepAlive("GET / HTTP/1.1\r\nHost: a\r\n\r\n") == true)
        #expect(keepAlive("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n") == false)
        #expect(keepAlive("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, CLOSE\r\n\r\n") == false)
        #expect(keepAlive("GET / HTTP/1.0\r\n\r\n") == false)
        #expect(keepAlive("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n") == true)
        #expect(keepAlive("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\nHost: a\r\n\r\n") == true)
    }

    @Test(arguments: [false, true])
    func absoluteFormTarget(byteByByte: Bool) throws {
        let run = runParser(
            bytes("GET http://example.com:8080/profiles/7?a=1 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n"),
            byteByByte: byteByByte)
        let request = try #require(run.requests.first?.request)
        #expect(request.target == "http://example.com:8080/profiles/7?a=1")
        #expect(request.path == "/profiles/7")
        #expect(request.query == "a=1")
        let bare = runParser(
            bytes("GET https://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n"), byteByByte: byteByByte)
        #expect(bare.requests.first?.request.path == "/")
    }

    /// The head reported before a body and the request completed after it carry the target's
    /// path and query as the request line gave them; the next request has its own.
    @Test func theHeadAndItsRequestCarryOneSplitOfTheTarget() throws {
        var parser = HTTPRequestParser()
        let (_, headEvent) = try parser.parse(bytes("PUT /p/1?a=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n"))
        guard case .head = headEvent else {
            Issue.record("expected a head, got \(headEvent)")
            return
        }
        let head = parser.headOfCurrentRequest
        #expect(head.path == "/p/1" && head.query == "a=1" && head.body.isEmpty)
        let (_, completed) = try parser.parse(bytes("{}"))
        guard case .request(let request, _) = completed else {
            Issue.record("expected a request, got \(completed)")
            return
        }
        #expect(request.target == "/p/1?a=1" && request.path == "/p/1" && request.query == "a=1")
        #expect(request.body == bytes("{}"))
        let (_, nextEvent) = try parser.parse(bytes("GET /q HTTP/1.1\r\nHost: a\r\n\r\n"))
        guard case .request(let next, _) = nextEvent else {
            Issue.record("expected a request, got \(nextEvent)")
            return
        }
        #expect(next.path == "/q" && next.query == nil)
    }

    @Test(arguments: [false, true])
    func customMethodTokenAndLeadingEmptyLine(byteByByte: Bool) throws {
        let run = runParser(bytes("\r\nPURGE /x HTTP/1.1\r\nHost: a\r\n\r\n"), byteByByte: byteByByte)
        let request = try #require(run.requests.first?.request)
        #expect(request.method.rawValue == "PURGE")
    }

    @Test(arguments: [false, true])
    func headerValuesAreTrimmedAndDuplicatesKept(byteByByte: Bool) throws {
        let run = runParser(
            bytes("GET / HTTP/1.1\r\nHost: a\r\nX-A: \t one \t\r\nx-a: two\r\nEmpty:\r\n\r\n"), byteByByte: byteByByte)
        let request = try #require(run.requests.first?.request)
        #expect(request.headers.values(for: "X-A") == ["one", "two"])
        #expect(request.headers["empty"] == "")
    }

    struct Violation: Sendable, CustomTestStringConvertible {
        var name: String
        var input: String
        var code: HTTPParserError.Code
        var status: Int
        var testDescription: String { name }
    }

    static let violations: [Violation] = [
        .init(
            name: "CL with TE",
            input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            code: .contentLengthWithTransferEncoding, status: 400),
        .init(
            name: "TE with CL",
            input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            code: .contentLengthWithTransferEncoding, status: 400),
        .init(
            name: "duplicate CL, same value",
            input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
            code: .duplicateContentLength, status: 400),
        .init(
            name: "CL list", input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc",
            code: .invalidContentLength, status: 400),
        .init(
            name: "CL sign", input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc",
            code: .invalidContentLength, status: 400),
        .init(
            name: "CL negative", input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
            code: .invalidContentLength, status: 400),
        .init(
            name: "CL hex", input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n",
            code: .invalidContentLength, status: 400),
        .init(
            name: "CL empty", input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n",
            code: .invalidContentLength, status: 400),
        .init(
            name: "TE gzip only", input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
            code: .invalidTransferEncoding, status: 400),
        .init(
            name: "TE chunked not final",
            input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            code: .invalidTransferEncoding, status: 400),
        .init(
            name: "TE chunked twice",
            input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            code: .invalidTransferEncoding, status: 400),
        .init(
            name: "TE gzip then chunked",
            input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            code: .unsupportedTransferEncoding, status: 501),
        .init(
            name: "TE chunkedx", input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunkedx\r\n\r\n",
            code: .invalidTransferEncoding, status: 400),
        .init(
            name: "TE empty", input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\n\r\n",
            code: .invalidTransferEncoding, status: 400),
        .init(
            name: "TE in HTTP/1.0", input: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            code: .invalidTransferEncoding, status: 400),
        .init(
            name: "obs-fold", input: "GET / HTTP/1.1\r\nHost: a\r\nX-A: one\r\n two\r\n\r\n",
            code: .obsoleteLineFolding, status: 400),
        .init(
            name: "whitespace before first header", input: "GET / HTTP/1.1\r\n Host: a\r\n\r\n",
            code: .obsoleteLineFolding, status: 400),
        .init(name: "bare CR in header", input: "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", code: .bareCR, status: 400),
        .init(name: "bare LF in header", input: "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", code: .bareLF, status: 400),
        .init(name: "bare LF ends head", input: "GET / HTTP/1.1\nHost: a\n\n", code: .bareLF, status: 400),
        .init(
            name: "bare CR in request line", input: "GET /\r HTTP/1.1\r\nHost: a\r\n\r\n", code: .bareCR, status: 400),
        .init(
            name: "space before colon", input: "GET / HTTP/1.1\r\nHost : a\r\n\r\n", code: .whitespaceBeforeColon,
            status: 400),
        .init(
            name: "tab before colon", input: "GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", code: .whitespaceBeforeColon,
            status: 400),
        .init(
            name: "no colon", input: "GET / HTTP/1.1\r\nHost: a\r\nNoColonHere\r\n\r\n", code: .missingColon,
            status: 400),
        .init(
            name: "empty name", input: "GET / HTTP/1.1\r\nHost: a\r\n: value\r\n\r\n", code: .invalidHeaderName,
            status: 400),
        .init(
            name: "bad name", input: "GET / HTTP/1.1\r\nHost: a\r\nX(y): value\r\n\r\n", code: .invalidHeaderName,
            status: 400),
        .init(
            name: "NUL in value", input: "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{0}b\r\n\r\n", code: .invalidHeaderValue,
            status: 400),
        .init(name: "bad method", input: "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", code: .invalidMethod, status: 400),
        .init(name: "empty method", input: " / HTTP/1.1\r\nHost: a\r\n\r\n", code: .invalidMethod, status: 400),
        .init(
            name: "double space", input: "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", code: .invalidRequestLine, status: 400),
        .init(name: "missing version", input: "GET /\r\nHost: a\r\n\r\n", code: .invalidRequestLine, status: 400),
        .init(
            name: "trailing space", input: "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", code: .invalidRequestLine, status: 400),
        .init(
            name: "lowercase version", input: "GET / http/1.1\r\nHost: a\r\n\r\n", code: .invalidVersion, status: 400),
        .init(name: "garbage version", input: "GET / HTTP/1.10\r\nHost: a\r\n\r\n", code: .invalidVersion, status: 400),
        .init(name: "HTTP/2.0", input: "GET / HTTP/2.0\r\nHost: a\r\n\r\n", code: .unsupportedVersion, status: 505),
        .init(name: "HTTP/0.9", input: "GET / HTTP/0.9\r\nHost: a\r\n\r\n", code: .unsupportedVersion, status: 505),
        .init(name: "bad target", input: "GET profiles HTTP/1.1\r\nHost: a\r\n\r\n", code: .invalidTarget, status: 400),
        .init(name: "asterisk with GET", input: "GET * HTTP/1.1\r\nHost: a\r\n\r\n", code: .invalidTarget, status: 400),
        .init(name: "no Host in 1.1", input: "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", code: .missingHost, status: 400),
        .init(
            name: "two Hosts", input: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", code: .duplicateHost, status: 400),
        .init(
            name: "chunk size not hex",
            input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n", code: .invalidChunkSize,
            status: 400),
        .init(
            name: "chunk size 0x",
            input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
            code: .invalidChunkSize, status: 400),
        .init(
            name: "chunk size leading space",
            input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\nhello\r\n0\r\n\r\n",
            code: .invalidChunkSize, status: 400),
        .init(
            name: "chunk size empty", input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
            code: .invalidChunkSize, status: 400),
        .init(
            name: "chunk size negative",
            input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n", code: .invalidChunkSize,
            status: 400),
        .init(
            name: "chunk data too long",
            input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n",
            code: .invalidChunkTerminator, status: 400),
        .init(
            name: "chunk data bare LF",
            input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n",
            code: .invalidChunkTerminator, status: 400),
        .init(
            name: "chunk size bare LF",
            input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n", code: .bareLF,
            status: 400),
        .init(
            name: "trailer obs-fold",
            input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: a\r\n b\r\n\r\n",
            code: .obsoleteLineFolding, status: 400),
        .init(
            name: "trailer without colon",
            input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nbogus\r\n\r\n",
            code: .missingColon, status: 400),
    ]

    @Test(arguments: violations, [false, true])
    func rejectsFramingViolations(violation: Violation, byteByByte: Bool) throws {
        let run = runParser(bytes(violation.input), byteByByte: byteByByte)
        let error = try #require(run.error, "accepted: \(violation.name)")
        #expect(error.code == violation.code)
        #expect(error.status.code == violation.status)
        #expect(run.requests.isEmpty)
    }

    static let limits = HTTPRequestParser.Limits(
        maxRequestLineBytes: 64, maxHeaderBytes: 128, maxHeaderCount: 4, maxBodyBytes: 16)

    @Test(arguments: [false, true])
    func requestLineLimitIs414(byteByByte: Bool) throws {
        let atLimit = "GET /" + String(repeating: "a", count: 64 - 14) + " HTTP/1.1"
        #expect(atLimit.utf8.count == 64)
        let ok = runParser(bytes(atLimit + "\r\nHost: a\r\n\r\n"), limits: Self.limits, byteByByte: byteByByte)
        #expect(ok.error == nil && ok.requests.count == 1)
        // Reported before the line ends: a client cannot make the server buffer an endless line.
        let long = runParser(
            bytes("GET /" + String(repeating: "a", count: 200)), limits: Self.limits, byteByByte: byteByByte)
        let error = try #require(long.error)
        #expect(error.code == .requestLineTooLong)
        #expect(error.status == .uriTooLong)
    }

    @Test(arguments: [false, true])
    func headerBlockLimitIs431(byteByByte: Bool) throws {
        let run = runParser(
            bytes("GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + String(repeating: "b", count: 200)), limits: Self.limits,
            byteByByte: byteByByte)
        let error = try #require(run.error)
        #expect(error.code == .headerBlockTooLarge)
        #expect(error.status == .requestHeaderFieldsTooLarge)
        // Exactly at the limit passes: 128 bytes of field lines with their CRLFs.
        let fill = String(repeating: "v", count: 128 - 9 - 5)
        let exact = runParser(
            bytes("GET / HTTP/1.1\r\nHost: a\r\nX: \(fill)\r\n\r\n"), limits: Self.limits, byteByByte: byteByByte)
        #expect(exact.error == nil)
        let over = runParser(
            bytes("GET / HTTP/1.1\r\nHost: a\r\nX: \(fill)v\r\n\r\n"), limits: Self.limits, byteByByte: byteByByte)
        #expect(over.error?.code == .headerBlockTooLarge)
    }

    @Test(arguments: [false, true])
    func headerCountLimitIs431(byteByByte: Bool) throws {
        let four = "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n"
        #expect(runParser(bytes(four + "\r\n"), limits: Self.limits, byteByByte: byteByByte).error == nil)
        let error = try #require(
            runParser(bytes(four + "D: 4\r\n\r\n"), limits: Self.limits, byteByByte: byteByByte).error)
        #expect(error.code == .tooManyHeaders)
        #expect(error.status.code == 431)
    }

    @Test(arguments: [false, true])
    func bodyLimitIs413BeforeAnyBodyByte(byteByByte: Bool) throws {
        // Only the head is fed: the error must come without the body.
        let run = runParser(
            bytes("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 17\r\n\r\n"), limits: Self.limits,
            byteByByte: byteByByte)
        let error = try #require(run.error)
        #expect(error.code == .bodyTooLarge)
        #expect(error.status == .contentTooLarge)
        let huge = runParser(
            bytes("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999999\r\n\r\n"),
            limits: Self.limits,
            byteByByte: byteByByte)
        #expect(huge.error?.code == .bodyTooLarge)
        // 100-continue is not offered for a body that would be refused.
        let expecting = runParser(
            bytes("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1000\r\n\r\n"),
            limits: Self.limits,
            byteByByte: byteByByte)
        #expect(expecting.continueRequests == 0)
        #expect(expecting.error?.status.code == 413)
    }

    @Test(arguments: [false, true])
    func chunkedBodyLimitIs413(byteByByte: Bool) throws {
        let run = runParser(
            bytes("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n9\r\n"),
            limits: Self.limits,
            byteByByte: byteByByte)
        #expect(run.error?.code == .bodyTooLarge)
        let hugeSize = runParser(
            bytes("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffffffff\r\n"),
            limits: Self.limits, byteByByte: byteByByte)
        #expect(hugeSize.error?.code == .bodyTooLarge)
    }

    @Test(arguments: [false, true])
    func trailerLimitIs431(byteByByte: Bool) {
        let run = runParser(
            bytes(
                "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: "
                    + String(repeating: "t", count: 200)),
            limits: Self.limits, byteByByte: byteByByte)
        #expect(run.error?.code == .trailersTooLarge)
        #expect(run.error?.status.code == 431)
    }

    @Test func staysFailedAfterAnError() {
        var parser = HTTPRequestParser()
        #expect(throws: HTTPParserError.self) { try parser.parse(bytes("GET / HTTP/1.1\r\nHost : a\r\n\r\n")) }
        #expect(throws: HTTPParserError.self) { try parser.parse(bytes("GET / HTTP/1.1\r\nHost: a\r\n\r\n")) }
    }

    @Test func isIdleOnlyBetweenRequests() throws {
        var parser = HTTPRequestParser()
        #expect(parser.isIdle)
        _ = try parser.parse(bytes("GE"))
        #expect(!parser.isIdle)
        _ = try parser.parse(bytes("T / HTTP/1.1\r\nHost: a\r\n\r\n"))
        #expect(parser.isIdle)
    }
}
