import HTTP1
import Testing

@Suite struct HTTPValuesTests {
    @Test func methodValidatesTokens() {
        #expect(HTTPMethod(rawValue: "GET") == .get)
        #expect(HTTPMethod(rawValue: "PROPFIND")?.description == "PROPFIND")
        #expect(HTTPMethod(rawValue: "") == nil)
        #expect(HTTPMethod(rawValue: "GE T") == nil)
        #expect(HTTPMethod(rawValue: "GET\r\n") == nil)
    }

    @Test func headersAreOrderedAndCaseInsensitive() {
        var headers: HTTPHeaders = ["Content-Type": "a", "Vary": "x"]
        headers.add(name: "vary", value: "y")
        #expect(headers["VARY"] == "x")
        #expect(headers.values(for: "Vary") == ["x", "y"])
        #expect(headers.contains("content-type"))
        #expect(headers.count == 3)
        headers.replaceOrAdd(name: "VARY", value: "z")
        #expect(headers.values(for: "vary") == ["z"])
        headers.replaceOrAdd(name: "ETag", value: "\"1\"")
        #expect(headers.map(\.name) == ["Content-Type", "Vary", "ETag"])
        headers.remove(name: "content-type")
        #expect(!headers.contains("Content-Type"))
        #expect(HTTPHeaders([("A", "1"), ("a", "2")]).values(for: "A") == ["1", "2"])
        #expect(HTTPHeaders().count == 0)
    }

    @Test func requestDerivesPathAndQuery() {
        let plain = HTTPRequest(method: .get, target: "/a/b", version: .http1_1, headers: [:], body: [])
        #expect(plain.path == "/a/b" && plain.query == nil)
        #expect(plain.queryValue(for: "x") == nil)
        let empty = HTTPRequest(method: .get, target: "/a?", version: .http1_1, headers: [:], body: [])
        #expect(empty.path == "/a" && empty.query == "")
        let query = HTTPRequest(
            method: .get, target: "/p?min_version=7&flag&name=J%C3%BCrgen&min_version=8&bad=%zz", version: .http1_1,
            headers: [:], body: [])
        #expect(query.queryValue(for: "min_version") == "7")
        #expect(query.queryValue(for: "flag") == "")
        #expect(query.queryValue(for: "name") == "Jürgen")
        #expect(query.queryValue(for: "bad") == "%zz")
        let absolute = HTTPRequest(method: .get, target: "http://h:1?q=1", version: .http1_1, headers: [:], body: [])
        #expect(absolute.path == "/" && absolute.query == "q=1")
    }

    @Test func statusConstants() {
        #expect(HTTPStatus.contentTooLarge.code == 413)
        #expect(HTTPStatus.uriTooLong.code == 414)
        #expect(HTTPStatus.unprocessableContent.code == 422)
        #expect(HTTPStatus.preconditionRequired.code == 428)
        #expect(HTTPStatus.requestHeaderFieldsTooLarge.code == 431)
        #expect(HTTPStatus.httpVersionNotSupported.code == 505)
        #expect(HTTPStatus(code: 418, reasonPhrase: "I'm a teapot").description == "418 I'm a teapot")
    }
}
