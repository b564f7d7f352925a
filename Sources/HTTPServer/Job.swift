import HTTP1

/// A request handed to a worker thread.
struct Job<Classified: Sendable>: Sendable {
    var fd: Int32
    var connectionID: UInt64
    /// The loop that owns the connection (``ServerCore/loops``): the answer goes back there.
    var loop: Int
    var request: HTTPRequest
    /// What the responder made of it (``HTTPResponder/Classified``), or what a batch that handed
    /// it on left in it.
    var classified: Classified
    var keepAlive: Bool
    var handoff: Handoff
    /// The worker may `send` a keep-alive response itself (no output of the loop is pending).
    var mayWriteDirectly: Bool
    /// A batch handed it on alone (``HTTPResponder/respond(to:from:worker:answer:)``): it is taken
    /// by itself, as a batch ``BatchOrigin/handedOn``.
    var alone = false
    /// Non-zero: a batch handed it on with others, to be answered together; jobs of one group
    /// are taken at once, as a batch ``BatchOrigin/handedOn``.
    var group: UInt64 = 0

    /// Whether a batch handed it on.
    var handedOn: Bool { alone || group != 0 }
}
