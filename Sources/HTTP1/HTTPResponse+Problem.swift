extension HTTPResponse {
    /// An RFC 9457 `application/problem+json` response of the stable shape
    /// `{"type":"about:blank","title":"<reason>","status":<code>,"detail":"<detail>"}`.
    ///
    /// ```swift
    /// return .problem(.conflict, detail: "version 3 is stale; current is 4")
    /// ```
    /// - Parameters:
    ///   - status: the status; its reason phrase becomes `title`.
    ///   - detail: short human-readable text; JSON-escaped here.
    ///   - headers: extra header fields (for example `Allow` or `Retry-After`).
    public static func problem(_ status: HTTPStatus, detail: String, headers: HTTPHeaders = [:]) -> HTTPResponse {
        var body: [UInt8] = []
        body.reserveCapacity(96 + detail.utf8.count)
        body.append(contentsOf: #"{"type":"about:blank","title":""#.utf8)
        appendJSONEscaped(status.reasonPhrase, to: &body)
        body.append(contentsOf: #"","status":"#.utf8)
        body.append(contentsOf: String(status.code).utf8)
        body.append(contentsOf: #","detail":""#.utf8)
        appendJSONEscaped(detail, to: &body)
        body.append(contentsOf: #""}"#.utf8)
        var allHeaders = headers
        allHeaders.replaceOrAdd(name: "Content-Type", value: "application/problem+json")
        return HTTPResponse(status: status, headers: allHeaders, body: body)
    }

    /// Appends `string` as the inside of a JSON string literal (RFC 8259 §7).
    public static func appendJSONEscaped(_ string: String, to buffer: inout [UInt8]) {
        let hexDigits = Array("0123456789abcdef".utf8)
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): buffer.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): buffer.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: buffer.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: buffer.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: buffer.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0x00..<0x20, 0x7F:
                buffer.append(contentsOf: Array(#"\u00"#.utf8))
                buffer.append(hexDigits[Int(byte >> 4)])
                buffer.append(hexDigits[Int(byte & 0x0F)])
            default: buffer.append(byte)
            }
        }
    }
}
