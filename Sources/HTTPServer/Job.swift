import HTTP1

/// A request handed to a worker thread.
struct Job: Sendable {
    var fd: Int32
    var connectionID: UInt64
    /// The loop that owns the connection (``ServerCore/loops``): the answer goes back there.
    var loop: Int
    var request: HTTPRequest
    var keepAlive: Bool
    var handoff: Handoff
    /// The worker may `send` a keep-alive response itself (no output of the loop is pending).
    var mayWriteDirectly: Bool
    /// A batch left it unanswered (``HTTPResponder/respond(to:worker:answer:)``): it is taken
    /// alone and answered with ``HTTPResponder/respond(to:worker:)``.
    var alone = false
    /// Non-zero: the batch lane left it with others to be answered together
    /// (``HTTPResponder/respond(together:worker:answer:)``); jobs of one group are taken at once.
    var group: UInt64 = 0
}
