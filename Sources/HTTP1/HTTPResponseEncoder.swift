/// Serialises a response head and body into one contiguous buffer, ready for a single write.
///
/// The encoder owns the framing fields: it writes `Date` (when given), `Content-Length` and
/// `Connection`, and skips any of those, and `Transfer-Encoding`, from the response's own headers.
/// A HEAD response carries the `Content-Length` of the body it would have had, but no body;
/// 1xx and 204 responses carry neither, 304 carries no body and no added `Content-Length`.
/// An event stream (``HTTPResponse/eventStream``) has no `Content-Length`: its body ends at close.
public enum HTTPResponseEncoder {
    /// How the response announces the connection's fate.
    public enum ConnectionHeader: Sendable {
        /// No `Connection` field (HTTP/1.1 keep-alive).
        case none
        /// `Connection: keep-alive` (an HTTP/1.0 client that asked for it).
        case keepAlive
        /// `Connection: close`.
        case close
    }

    /// `HTTP/1.1 100 Continue` with its empty line.
    public static let continueHead: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    /// Appends the encoded response to `buffer`.
    /// - Parameters:
    ///   - date: the `Date` field value bytes (IMF-fixdate), or `nil` to omit it.
    ///   - isHeadResponse: true when answering HEAD: the body is left out, its length kept.
    public static func encode(
        _ response: HTTPResponse, date: [UInt8]?, isHeadResponse: Bool, connection: ConnectionHeader,
        into buffer: inout [UInt8]
    ) {
        let status = response.status
        let sendsBody = status.allowsBody && !isHeadResponse
        var estimate = 64 + status.reasonPhrase.utf8.count + (sendsBody ? response.body.count : 0)
        for field in response.headers.storage { estimate += field.name.utf8.count + field.value.utf8.count + 4 }
        buffer.reserveCapacity(buffer.count + estimate)

        buffer.append(contentsOf: "HTTP/1.1 ".utf8)
        appendDecimal(status.code, to: &buffer)
        buffer.append(HTTPSyntax.space)
        buffer.append(contentsOf: status.reasonPhrase.utf8)
        buffer.append(contentsOf: "\r\n".utf8)
        if let date {
            buffer.append(contentsOf: "Date: ".utf8)
            buffer.append(contentsOf: date)
            buffer.append(contentsOf: "\r\n".utf8)
        }
        if status.allowsBody, response.eventStream == nil {
            buffer.append(contentsOf: "Content-Length: ".utf8)
            appendDecimal(response.body.count, to: &buffer)
            buffer.append(contentsOf: "\r\n".utf8)
        }
        switch connection {
        case .none: break
        case .keepAlive: buffer.append(contentsOf: "Connection: keep-alive\r\n".utf8)
        case .close: buffer.append(contentsOf: "Connection: close\r\n".utf8)
        }
        for field in response.headers.storage where !isFramingField(field.name, hasDate: date != nil) {
            buffer.append(contentsOf: field.name.utf8)
            buffer.append(contentsOf: ": ".utf8)
            buffer.append(contentsOf: field.value.utf8)
            buffer.append(contentsOf: "\r\n".utf8)
        }
        buffer.append(contentsOf: "\r\n".utf8)
        if sendsBody { buffer.append(contentsOf: response.body) }
    }

    /// The encoded response as a new buffer.
    public static func encode(
        _ response: HTTPResponse, date: [UInt8]?, isHeadResponse: Bool = false, connection: ConnectionHeader = .none
    ) -> [UInt8] {
        var buffer: [UInt8] = []
        encode(response, date: date, isHeadResponse: isHeadResponse, connection: connection, into: &buffer)
        return buffer
    }

    private static func isFramingField(_ name: String, hasDate: Bool) -> Bool {
        switch name.utf8.count {
        case 14: HTTPSyntax.equalsIgnoringCase(name.utf8, "content-length".utf8)
        case 17: HTTPSyntax.equalsIgnoringCase(name.utf8, "transfer-encoding".utf8)
        case 10: HTTPSyntax.equalsIgnoringCase(name.utf8, "connection".utf8)
        case 4: hasDate && HTTPSyntax.equalsIgnoringCase(name.utf8, "date".utf8)
        default: false
        }
    }

    static func appendDecimal(_ value: Int, to buffer: inout [UInt8]) {
        precondition(value >= 0)
        if value < 10 {
            buffer.append(UInt8(truncatingIfNeeded: value) + 0x30)
            return
        }
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var remaining = value
        withUnsafeMutableBytes(of: &digits) { raw in
            while remaining > 0 {
                raw[count] = UInt8(truncatingIfNeeded: remaining % 10) + 0x30
                remaining /= 10
                count += 1
            }
            for index in stride(from: count - 1, through: 0, by: -1) { buffer.append(raw[index]) }
        }
    }
}
