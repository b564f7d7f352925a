import HTTP1

/// A request handed to a worker thread.
struct Job<Classified: Sendable>: Sendable {
    /// The request as the responder gets it in a batch, with the connection its answer goes to
    /// (``BatchedRequest/connection``).
    var member: BatchedRequest<Classified>
    /// A batch handed it on alone (``HTTPResponder/respond(to:from:worker:answer:)``): it is taken
    /// by itself, as a batch ``BatchOrigin/handedOn``.
    var alone = false
    /// Non-zero: a batch handed it on with others, to be answered together; jobs of one group
    /// are taken at once, as a batch ``BatchOrigin/handedOn``.
    var group: UInt64 = 0

    /// Whether a batch handed it on.
    var handedOn: Bool { alone || group != 0 }
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
