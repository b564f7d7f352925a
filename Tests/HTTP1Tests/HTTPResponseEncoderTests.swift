import Foundation
import HTTP1
import Testing

@Suite struct HTTPResponseEncoderTests {
    let date = Array("Sun, 06 Nov 1994 08:49:37 GMT".utf8)

    func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test func encodesHeadAndBodyInOneBuffer() {
        let response = HTTPResponse(status: .ok, headers: ["Content-Type": "text/plain"], body: Array("hello".utf8))
        let encoded = HTTPResponseEncoder.encode(response, date: date)
        #expect(
            text(encoded)
                == "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 5\r\n"
                + "Content-Type: text/plain\r\n\r\nhello")
    }

    @Test func headKeepsLengthButDropsBody() {
        let response = HTTPResponse(status: .ok, body: Array(repeating: 0x61, count: 1234))
        let encoded = text(HTTPResponseEncoder.encode(response, date: nil, isHeadResponse: true))
        #expect(encoded == "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n")
    }

    @Test func noContentAndNotModifiedCarryNoBody() {
        let noContent = text(HTTPResponseEncoder.encode(HTTPResponse(status: .noContent, body: [1, 2]), date: nil))
        #expect(noContent == "HTTP/1.1 204 No Content\r\n\r\n")
        let notModified = text(
            HTTPResponseEncoder.encode(
                HTTPResponse(status: .notModified, headers: ["ETag": "\"3\""], body: [1]), date: nil))
        #expect(notModified == "HTTP/1.1 304 Not Modified\r\nETag: \"3\"\r\n\r\n")
    }

    @Test func connectionHeaderAndFramingFieldsAreOwnedByTheEncoder() {
        let response = HTTPResponse(
            status: .created,
            headers: ["content-length": "999", "Transfer-Encoding": "chunked", "Connection": "keep-alive", "X": "y"],
            body: [0x41])
        let closing = text(HTTPResponseEncoder.encode(response, date: nil, connection: .close))
        #expect(closing == "HTTP/1.1 201 Created\r\nContent-Length: 1\r\nConnection: close\r\nX: y\r\n\r\nA")
        let keepAlive = text(HTTPResponseEncoder.encode(response, date: nil, connection: .keepAlive))
        #expect(keepAlive.contains("\r\nConnection: keep-alive\r\n"))
    }

    @Test func encodesLargeContentLength() {
        let response = HTTPResponse(status: .ok, body: Array(repeating: 0, count: 1_048_577))
        let encoded = HTTPResponseEncoder.encode(response, date: nil)
        #expect(text(Array(encoded.prefix(60))).contains("Content-Length: 1048577\r\n"))
        #expect(encoded.count == "HTTP/1.1 200 OK\r\nContent-Length: 1048577\r\n\r\n".utf8.count + 1_048_577)
    }

    @Test func problemDocumentHasTheStableShapeAndEscapes() throws {
        let detail = "quote \" backslash \\ newline \n control \u{1} done"
        let response = HTTPResponse.problem(.conflict, detail: detail, headers: ["Retry-After": "1"])
        #expect(response.status == .conflict)
        #expect(response.headers["content-type"] == "application/problem+json")
        #expect(response.headers["Retry-After"] == "1")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        #expect(object["type"] as? String == "about:blank")
        #expect(object["title"] as? String == "Conflict")
        #expect(object["status"] as? Int == 409)
        #expect(object["detail"] as? String == detail)
        #expect(object.count == 4)
    }
}
