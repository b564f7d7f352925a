import HTTP1
import Synchronization

/// What the event loop, the workers and the public ``HTTPServer`` share. Every member is `Sendable`.
final class ServerCore: Sendable {
    let queue: WorkQueue
    let mailbox: Mailbox
    /// Set once shutdown begins: responses from then on carry `Connection: close`.
    let draining = Atomic<Bool>(false)
    let shutdownRequested = Atomic<Bool>(false)
    let openConnections = Atomic<Int>(0)
    /// Idle keep-alive connections closed to make room for a new one at the connection limit.
    let idleClosedForRoom = Atomic<Int>(0)
    let busyWorkers = Atomic<Int>(0)
    /// The event streams the loop serves, if the server has any.
    let eventStreams: EventStreams?
    /// ``HTTPResponder/screen(head:)``.
    let screenHead: @Sendable (HTTPRequest) -> HTTPResponse?

    init(
        queueCapacity: Int, workerCount: Int, eventFD: Int32, eventStreams: EventStreams?,
        screenHead: @escaping @Sendable (HTTPRequest) -> HTTPResponse?
    ) {
        self.screenHead = screenHead
        queue = WorkQueue(capacity: queueCapacity, workerCount: workerCount)
        mailbox = Mailbox(eventFD: eventFD, workerCount: workerCount)
        self.eventStreams = eventStreams
    }
}
