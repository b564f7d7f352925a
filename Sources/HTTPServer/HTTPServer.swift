import Dispatch
import HTTP1
public import Logging
import ServiceRuntime
import Synchronization

/// A SwiftNIO-free HTTP/1.1 server: epoll event loop threads (one per usable CPU by default)
/// plus a fixed pool of worker threads.
///
/// ```
///            accept (loop 0) → the loop with fewest connections
///            read/parse/write (non-blocking)                respond (may block)
/// clients ⇄ [ event loop 0 … L-1 ] ──Job──▶ bounded WorkQueue ──▶ [ worker 0 … N-1 ]
///                    ▲                (full → 503 Retry-After)          │
///                    └── eventfd ◀── the loop's Mailbox ◀── encoded response ──┘
/// ```
///
/// Each connection stays on the loop it was handed to: its requests' answers go back to that
/// loop's mailbox (``ConnectionTicket/loop``), and an event stream it opens is written by that
/// loop. The limits (connections, streams, per client) are the process's, counted across loops.
///
/// A keep-alive response on a connection with nothing else pending is `send` by the worker itself
/// (see ``Handoff``); only a partial write, a close, or a connection the loop is waiting on goes
/// back through the mailbox. A request is classified once, on its loop
/// (``HTTPResponder/classify(head:bodyFollows:)``), and goes to the loop's batch lane or to the
/// workers with what the responder made of it. Workers answer batches — one request, up to
/// ``HTTPResponder/batchLimit(worker:)``, or all the lane has queued — and what a batch hands on
/// goes to the front of the queue, each group to one worker (``BatchOrigin``).
///
/// ```swift
/// let server = HTTPServer(configuration: config, responder: router, logger: logger)
/// let port = try server.start()
/// // … on SIGTERM:
/// server.shutdown()
/// server.waitUntilStopped()
/// ```
public final class HTTPServer<Responder: HTTPResponder>: Sendable {
    private enum Lifecycle: Sendable {
        case idle
        case starting
        case running(ServerCore<Responder.Classified>)
        case stopped
    }

    private let configuration: HTTPServerConfiguration
    private let responder: Responder
    private let logger: Logger
    private let eventStreams: EventStreams?
    /// The loops, the workers and their queues, typed by what the responder makes of a request.
    private typealias Core = ServerCore<Responder.Classified>

    private let lifecycle = Mutex<Lifecycle>(.idle)
    /// Left once every loop has stopped and the workers with them.
    private let loopThread = DispatchGroup()

    /// - Parameter eventStreams: the streams the responder may open (``HTTP1/HTTPResponse/eventStream``);
    ///   without it such a response is answered 503.
    public init(
        configuration: HTTPServerConfiguration, responder: Responder, logger: Logger,
        eventStreams: EventStreams? = nil
    ) {
        self.configuration = configuration
        self.responder = responder
        self.logger = logger
        self.eventStreams = eventStreams
    }

    /// Binds, listens, starts the event loop and the workers; returns the bound port.
    /// - Throws: ``IOError`` when binding fails, or the error of a worker's `makeWorker`.
    public func start() throws -> Int {
        try lifecycle.withLock { state throws(IOError) in
            guard case .idle = state else { throw IOError(errnoCode: 22, reason: "server already started") }
            state = .starting
        }
        do {
            let port = try startThreads()
            logger.info(
                "listening",
                metadata: [
                    "address": "\(configuration.host):\(port)",
                    "event_loops": "\(configuration.resolvedEventLoopCount)",
                    "workers": "\(configuration.workerCount)", "batch_workers": "\(configuration.batchWorkerCount)",
                ])
            return port
        } catch {
            lifecycle.withLock { $0 = .stopped }
            throw error
        }
    }

    private func startThreads() throws -> Int {
        System.ignoreSIGPIPE()
        System.raiseFileDescriptorLimit()
        let (listenFD, port) = try System.makeListener(
            host: configuration.host, port: configuration.port, backlog: configuration.backlog)
        var descriptors: [(epollFD: Int32, eventFD: Int32)] = []
        func closeLoopDescriptors() {
            for loop in descriptors {
                System.close(loop.epollFD)
                System.close(loop.eventFD)
            }
        }
        func closeAll() {
            System.close(listenFD)
            closeLoopDescriptors()
        }
        do {
            for index in 0..<configuration.resolvedEventLoopCount {
                let epollFD = try System.epollCreate()
                let eventFD: Int32
                do {
                    eventFD = try System.eventfdCreate()
                } catch {
                    System.close(epollFD)
                    throw error
                }
                descriptors.append((epollFD, eventFD))
                try System.epollAdd(epollFD, eventFD, events: System.epollIn)
                // The first loop accepts for all.
                if index == 0 { try System.epollAdd(epollFD, listenFD, events: System.epollIn) }
            }
        } catch {
            closeAll()
            throw error
        }
        let workerCount = max(configuration.workerCount, 1)
        let batchWorkerCount = max(configuration.batchWorkerCount, 0)
        let core = ServerCore(
            queueCapacity: configuration.queueCapacity, workerCount: workerCount, batchWorkerCount: batchWorkerCount,
            loops: descriptors, eventStreams: eventStreams,
            classify: { [responder] head, bodyFollows in responder.classify(head: head, bodyFollows: bodyFollows) })

        // Workers first: each creates its Worker on its own thread; any failure fails start().
        let workers = DispatchGroup()
        let startup = WorkerStartup()
        do {
            for index in 0..<workerCount + batchWorkerCount {
                let inBatchLane = index >= workerCount
                workers.enter()
                try RuntimeThread.detach(name: inBatchLane ? "http-batch-\(index - workerCount)" : "http-worker-\(index)") {
                    [self] in
                    defer { workers.leave() }
                    if inBatchLane {
                        runBatchWorker(index: index, laneIndex: index - workerCount, core: core, startup: startup)
                    } else {
                        runWorker(index: index, core: core, startup: startup)
                    }
                }
            }
        } catch {
            core.stopQueues()
            workers.leave()
            workers.wait()
            closeAll()
            throw error
        }
        if let failure = startup.waitForAll(workerCount + batchWorkerCount) {
            core.stopQueues()
            workers.wait()
            closeAll()
            throw failure
        }

        lifecycle.withLock { $0 = .running(core) }
        eventStreams?.attach(wakeFDs: descriptors.map(\.eventFD))
        // Each loop's descriptors still in a worker when it stopped: closed once the workers are gone.
        let abandoned = Mutex<[Int32]>([])
        let loops = DispatchGroup()
        loopThread.enter()
        var running = 0
        do {
            for peer in core.loops {
                loops.enter()
                try RuntimeThread.detach(name: "http-loop-\(peer.index)") { [self] in
                    let loop = EventLoop(
                        core: core, peer: peer, configuration: configuration, logger: logger,
                        listenFD: peer.index == 0 ? listenFD : nil)
                    let left = loop.run()
                    abandoned.withLock { $0 += left }
                    loops.leave()
                }
                running += 1
            }
        } catch {
            // Some loops run: stop them as a shutdown would, then fail.
            loops.leave()
            if running > 0 {
                core.shutdownRequested.store(true, ordering: .releasing)
                core.wakeLoops()
            }
            loops.wait()
            eventStreams?.attach(wakeFDs: [])
            core.stopQueues()
            workers.wait()
            if running == 0 { System.close(listenFD) }
            for fd in abandoned.withLock({ $0 }) { System.close(fd) }
            closeLoopDescriptors()
            lifecycle.withLock { $0 = .stopped }
            loopThread.leave()
            throw error
        }
        loops.notify(queue: .global()) { [self] in
            eventStreams?.attach(wakeFDs: [])
            core.stopQueues()
            workers.wait()
            // Only now can no worker write into these descriptors.
            for fd in abandoned.withLock({ $0 }) { System.close(fd) }
            for peer in core.loops {
                // Accepted for a loop that had already stopped.
                for connection in peer.mailbox.takeUnclaimedConnections() { System.close(connection.fd) }
            }
            // No signal can reach an eventfd once the state is .stopped and the workers are gone.
            lifecycle.withLock { $0 = .stopped }
            closeLoopDescriptors()
            logger.info("stopped")
            loopThread.leave()
        }
        return port
    }

    /// The responder's worker `index`, made on the calling thread; reports the outcome to `startup`.
    private func makeWorker(index: Int, startup: WorkerStartup) -> Responder.Worker? {
        do {
            let worker = try responder.makeWorker(index: index)
            startup.report(nil)
            return worker
        } catch {
            startup.report(error)
            return nil
        }
    }

    private func runWorker(index: Int, core: Core, startup: WorkerStartup) {
        guard let worker = makeWorker(index: index, startup: startup) else { return }
        var dateCache = DateCache()
        let intake = Intake<Responder.Classified>()
        var batch: [BatchedRequest<Responder.Classified>] = []
        func finish(_ member: BatchedRequest<Responder.Classified>, _ response: HTTPResponse) {
            self.finish(member, response, core: core, worker: index, dateCache: &dateCache)
        }
        /// A batch handed on is answered here, whole.
        func answerHandedOn(_ members: [BatchedRequest<Responder.Classified>]) {
            let left = responder.respond(to: members, from: .handedOn, worker: worker, answer: finish)
            for member in left.joined() { finish(member, Self.unanswered) }
        }
        while let origin = core.queue.dequeue(
            worker: index, limit: responder.batchLimit(worker: worker), intake: intake, into: &batch)
        {
            core.busyWorkers.add(1, ordering: .relaxed)
            if origin == .handedOn {
                answerHandedOn(batch)
            } else {
                let handedOn = responder.respond(to: batch, from: .queue, worker: worker, answer: finish)
                // Other workers answer what this batch handed on, so none waits behind the others
                // here; what does not fit in the queue this worker answers itself, each alone. Most
                // batches hand nothing on, and each call of `handOn` looks up its types (unspecialized).
                if !handedOn.isEmpty {
                    for member in handOn(handedOn, core: core) { answerHandedOn([member]) }
                }
            }
            // Answered: their bodies are not kept until this worker's next batch (64 workers
            // each holding a group of 64 writes is megabytes).
            batch.removeAll(keepingCapacity: true)
            core.busyWorkers.subtract(1, ordering: .relaxed)
        }
    }

    /// A worker of the batch lane of loop `laneIndex % loops`: takes every queued request of that
    /// lane (up to ``HTTPServerConfiguration/batchLaneLimit``), answers what the batch can, and
    /// hands the rest to the other workers — it never answers one alone itself, so it never
    /// waits on anything but the batch's shared round trip.
    private func runBatchWorker(index: Int, laneIndex: Int, core: Core, startup: WorkerStartup) {
        guard let lane = core.lanes[laneIndex % core.loops.count] else { return startup.report(nil) }
        guard let worker = makeWorker(index: index, startup: startup) else { return }
        var dateCache = DateCache()
        let intake = Intake<Responder.Classified>()
        var batch: [BatchedRequest<Responder.Classified>] = []
        let limit = max(configuration.batchLaneLimit, 1)
        while lane.dequeue(worker: laneIndex / core.loops.count, limit: limit, intake: intake, into: &batch) != nil {
            core.busyWorkers.add(1, ordering: .relaxed)
            let handedOn = responder.respond(to: batch, from: .lane, worker: worker) { member, response in
                finish(member, response, core: core, worker: index, dateCache: &dateCache)
            }
            for member in handOn(handedOn, core: core) {
                // The other workers' queue is full: answer as the loop does when it is.
                core.refusedAtCapacity.add(1, ordering: .relaxed)
                finish(member, .atCapacity, core: core, worker: index, dateCache: &dateCache)
            }
            batch.removeAll(keepingCapacity: true)
            core.busyWorkers.subtract(1, ordering: .relaxed)
        }
    }

    /// Puts what a batch handed on at the front of the workers' queue, each request with what the
    /// batch left in its classified value: each group to be taken whole, the requests handed on
    /// alone each by itself, in their order. Returns what did not fit.
    private func handOn(
        _ groups: [[BatchedRequest<Responder.Classified>]], core: Core
    ) -> [BatchedRequest<Responder.Classified>] {
        var overflow: [BatchedRequest<Responder.Classified>] = []
        for group in groups where group.count > 1 { overflow += core.queue.requeue(group, together: true) }
        overflow += core.queue.requeue(groups.filter { $0.count == 1 }.map { $0[0] })
        return overflow
    }

    /// The answer to a request a batch handed on should have answered and returned instead.
    private static var unanswered: HTTPResponse {
        .problem(.internalServerError, detail: "the request was not answered")
    }

    /// Sends `response` to the request's connection — itself, when it may — or posts it to the loop.
    private func finish(
        _ member: BatchedRequest<Responder.Classified>, _ response: HTTPResponse, core: Core, worker index: Int,
        dateCache: inout DateCache
    ) {
        // One the server did not receive (``BatchedRequest/init(request:classified:)``): no
        // connection waits for its answer.
        guard let ticket = member.connection else { return }
        let close = !ticket.keepAlive || core.draining.load(ordering: .relaxed) || Self.asksToClose(response)
        let bytes = HTTPResponseEncoder.encode(
            response, date: dateCache.current(), isHeadResponse: member.request.method == .head,
            connection: HTTPResponseEncoder.ConnectionHeader(close: close, version: member.request.version))
        let kind: Completion.Kind
        if let stream = response.eventStream {
            // The loop owns streams: it writes the first bytes and keeps the connection.
            let bytes = HTTPResponseEncoder.encode(
                response, date: dateCache.current(), isHeadResponse: false, connection: .close)
            kind = .stream(bytes: bytes, stream: stream)
        } else if ticket.mayWriteDirectly, !close {
            switch Self.writeDirectly(bytes, to: ticket.fd) {
            case .complete:
                // Last touch of the connection: from here the loop may close the descriptor.
                guard ticket.handoff.workerFinished() else { return }
                kind = .written
            case .partial(let sent):
                kind = .response(bytes: Array(bytes[sent...]), closeAfter: false)
            case .failed:
                kind = .failed
            }
        } else {
            kind = .response(bytes: bytes, closeAfter: close)
        }
        core.loops[ticket.loop].mailbox.post(
            Completion(fd: ticket.fd, connectionID: ticket.connectionID, kind: kind), from: index)
    }

    private enum DirectWrite {
        case complete
        /// The socket buffer filled (`EAGAIN`) after `sent` bytes: the loop writes the rest.
        case partial(sent: Int)
        case failed
    }

    /// Sends a keep-alive response on the worker thread, saving the loop a wake-up and a write.
    /// The descriptor cannot be closed meanwhile: the loop waits for ``Handoff/workerFinished()``.
    private static func writeDirectly(_ bytes: [UInt8], to fd: Int32) -> DirectWrite {
        var sent = 0
        while sent < bytes.count {
            let result: IOResult<Int>
            do {
                result = try bytes.withUnsafeBytes { buffer throws(IOError) in
                    try System.send(fd, UnsafeRawBufferPointer(rebasing: buffer[sent...]))
                }
            } catch {
                return .failed
            }
            guard case .processed(let written) = result else { return .partial(sent: sent) }
            sent += written
        }
        return .complete
    }

    private static func asksToClose(_ response: HTTPResponse) -> Bool {
        guard let value = response.headers["Connection"] else { return false }
        return value.split(separator: ",").contains {
            $0.trimmingPrefix(while: \.isWhitespace).lowercased().hasPrefix("close")
        }
    }

    /// Graceful shutdown: stop accepting, close idle keep-alive connections, let in-flight requests
    /// finish (their responses carry `Connection: close`) until `drainTimeout`, then close the rest.
    /// Idempotent, callable from any thread.
    public func shutdown() {
        lifecycle.withLock { state in
            switch state {
            case .idle, .starting:
                state = .stopped
            case .running(let core):
                if !core.shutdownRequested.exchange(true, ordering: .acquiringAndReleasing) {
                    core.wakeLoops()
                }
            case .stopped:
                break
            }
        }
    }

    /// Blocks until shutdown has completed and all threads have exited.
    public func waitUntilStopped() {
        loopThread.wait()
    }

    public var statistics: HTTPServerStatistics {
        lifecycle.withLock { state in
            guard case .running(let core) = state else {
                return HTTPServerStatistics(openConnections: 0, queuedRequests: 0, busyWorkers: 0)
            }
            return HTTPServerStatistics(
                openConnections: core.openConnections.load(ordering: .relaxed),
                queuedRequests: core.queue.queued.load(ordering: .relaxed)
                    + core.lanes.reduce(0) { $0 + ($1?.queued.load(ordering: .relaxed) ?? 0) },
                busyWorkers: core.busyWorkers.load(ordering: .relaxed),
                eventStreams: core.eventStreams?.statistics,
                idleConnectionsClosedForRoom: core.idleClosedForRoom.load(ordering: .relaxed),
                requestsRefusedAtCapacity: core.refusedAtCapacity.load(ordering: .relaxed),
                loops: core.loops.map {
                    EventLoopStatistics(
                        openConnections: $0.openConnections.load(ordering: .relaxed),
                        requests: $0.requests.load(ordering: .relaxed))
                })
        }
    }
}

/// Collects the outcome of each worker's `makeWorker`.
private final class WorkerStartup: Sendable {
    private let failures = Mutex<[any Error]>([])
    private let reported = DispatchSemaphore(value: 0)

    func report(_ error: (any Error)?) {
        if let error { failures.withLock { $0.append(error) } }
        reported.signal()
    }

    /// Waits for `count` reports; returns the first failure.
    func waitForAll(_ count: Int) -> (any Error)? {
        for _ in 0..<count { reported.wait() }
        return failures.withLock { $0.first }
    }
}
