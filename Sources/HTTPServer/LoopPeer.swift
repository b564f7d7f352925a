import Synchronization

/// What the rest of the server knows of one event loop: where to post to it, and its load.
/// The loop itself (``EventLoop``) is confined to its thread; this part is shared.
final class LoopPeer: Sendable {
    let index: Int
    let epollFD: Int32
    let mailbox: Mailbox
    /// Connections this loop serves now, plus those the acceptor handed it that it has not taken
    /// yet (so the next goes elsewhere at once): the acceptor picks the loop with fewest.
    let openConnections = Atomic<Int>(0)
    /// Requests this loop has parsed and handed on: to the workers, or answered 503 at capacity.
    let requests = Atomic<Int>(0)

    init(index: Int, epollFD: Int32, mailbox: Mailbox) {
        self.index = index
        self.epollFD = epollFD
        self.mailbox = mailbox
    }
}
