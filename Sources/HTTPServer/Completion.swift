import HTTP1

/// A worker's message about a connection, on its way back to the event loop.
struct Completion: Sendable {
    enum Kind: Sendable {
        /// An encoded response (or its unsent tail) for the loop to write.
        case response(bytes: [UInt8], closeAfter: Bool)
        /// The worker wrote the whole response itself and the loop had asked to hear about it.
        case written
        /// The worker's `send` failed: the connection is dead.
        case failed
        /// The response opens an event stream: the loop writes `bytes` and keeps the connection.
        case stream(bytes: [UInt8], stream: HTTPResponse.EventStream)
    }

    var fd: Int32
    var connectionID: UInt64
    var kind: Kind
}
