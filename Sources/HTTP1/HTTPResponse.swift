/// A response: status, header fields and body.
///
/// The server adds `Date`, `Content-Length` and, when it closes the connection, `Connection: close`;
/// any `Content-Length`, `Transfer-Encoding`, `Date` or `Connection` set here is replaced.
public struct HTTPResponse: Sendable {
    public var status: HTTPStatus
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: HTTPStatus, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
