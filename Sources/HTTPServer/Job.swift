import HTTP1

/// A request queued for a worker, less what the responder made of it: the queue keeps that,
/// typed, beside it (``WorkQueue``).
struct Job: Sendable {
    var request: HTTPRequest
    /// Where its answer goes (``BatchedRequest/connection``).
    var connection: ConnectionTicket?
    /// A batch handed it on alone (``HTTPResponder/respond(to:from:worker:answer:)``): it is taken
    /// by itself, as a batch ``BatchOrigin/handedOn``.
    var alone = false
    /// Non-zero: a batch handed it on with others, to be answered together; jobs of one group
    /// are taken at once, as a batch ``BatchOrigin/handedOn``.
    var group: UInt64 = 0
}

/// The connection a request came on, and how its answer may be sent there: what a
/// ``BatchedRequest`` carries so that its answer, or the batch it is handed on to, finds the
/// connection whatever the responder did with the batch's order.
struct ConnectionTicket: Sendable {
    var fd: Int32
    /// Distinguishes the connection from a later one that reuses `fd`.
    var connectionID: UInt64
    /// The loop that owns the connection (``ServerCore/loops``): the answer goes back there.
    var loop: Int
    var keepAlive: Bool
    var handoff: Handoff
    /// The worker may `send` a keep-alive response itself (no output of the loop is pending).
    var mayWriteDirectly: Bool
}
