import CLinuxShims
import HTTP1
import Logging
import ServiceRuntime
import Synchronization

/// One epoll loop: reads, parses, hands requests to the workers, writes responses, for the
/// connections it owns. A server runs one per usable CPU (``HTTPServerConfiguration/eventLoopCount``).
///
/// Confined to its own thread. The loop with the listener accepts every connection and hands
/// each to the loop that has fewest (itself included) through that loop's ``Mailbox``; from then
/// on the connection, its requests' answers and its event stream stay on that loop (docs/design.md
/// §10). Sockets are registered once, edge-triggered, for input and output, so no `epoll_ctl` is
/// needed per request: a connection whose request is with a worker is simply not
/// read (backpressure) and its readiness is remembered in ``Connection/mayRead``. Workers write
/// keep-alive responses themselves when nothing else is pending on the connection (``Handoff``);
/// otherwise they post encoded responses to the ``Mailbox`` and wake the loop through an eventfd.
///
/// Invariant: the loop never closes a connection whose request is with a worker (``close(_:)``
/// checks it), so a worker never writes into a reused descriptor number. While a request is with a
/// worker, socket errors are remembered (``Connection/failed``), deadlines do not run, and shutdown
/// waits for the worker; a connection still in a worker when the loop exits is only shut down
/// (`SHUT_RDWR`) and its descriptor closed after the workers have stopped.
///
/// Event streams (``EventStreams``) stay here once a worker has opened one: the loop keeps each
/// topic's streams, writes published events and heartbeats into them, and cuts a stream whose
/// reader lets more than ``EventStreams/Configuration/maxBufferedBytes`` pile up. A quiet stream
/// costs its ``Connection`` and kernel socket, never a thread (docs/design.md §4).
///
/// Generic over what the responder makes of a request (``HTTPResponder/Classified``): that value
/// goes, typed, from the head the loop classified to the queue of the worker that answers it. The
/// code is not specialized for it (the responder comes from another module), so only what holds
/// that value is generic: connections, and what they are kept in, are not.
final class EventLoop<Classified: Sendable> {
    let core: ServerCore<Classified>
    /// This loop's shared side: its mailbox and load counters.
    let peer: LoopPeer
    /// This loop's batch lane (``ServerCore/lanes``), if a lane worker serves it.
    private let lane: WorkQueue<Classified>?
    private let configuration: HTTPServerConfiguration
    let logger: Logger
    private let epollFD: Int32
    private let eventFD: Int32
    private var listenFD: Int32?
    private var connections: [Connection?] = []
    /// What the responder made of the head of each request whose body is being read, by the
    /// descriptor of its connection (``Connection/headToBatchLane``).
    private let classifiedHeads = TypedSlots<Classified>(capacity: 0)
    private var connectionCount = 0
    private var nextConnectionID: UInt64 = 0
    let limits: HTTPRequestParser.Limits
    private let timeouts: ConnectionStateMachine<ContinuousClock.Instant>.Timeouts
    private let readBuffer: UnsafeMutableBufferPointer<UInt8>
    private let events: UnsafeMutableBufferPointer<epoll_event>
    private var completions: [Completion] = []
    private var handedOver: [AcceptedConnection] = []
    /// Where the acceptor starts looking for the least loaded loop, so ties go round robin.
    private var nextLoop = 0
    var drainDeadline: ContinuousClock.Instant?
    private var acceptPausedUntil: ContinuousClock.Instant?
    private let tick: Duration
    private let clock = ContinuousClock()
    private var dateCache = DateCache()
    /// Open event streams by topic; each connection knows its index in each list (``StreamState``).
    var streamTopics: [Int64: [Connection]] = [:]
    var streamEvents: [EventStreams.Event] = []
    var nextHeartbeat: ContinuousClock.Instant

    /// - Parameter listenFD: the listening socket, for the loop that accepts (one per server).
    init(
        core: ServerCore<Classified>, peer: LoopPeer, configuration: HTTPServerConfiguration,
        logger: Logger, listenFD: Int32?
    ) {
        self.core = core
        self.peer = peer
        self.lane = core.lanes[peer.index]
        self.configuration = configuration
        self.logger = logger
        self.epollFD = peer.epollFD
        self.eventFD = peer.mailbox.eventFD
        self.listenFD = listenFD
        self.limits = HTTPRequestParser.Limits(
            maxRequestLineBytes: configuration.maxRequestLineBytes, maxHeaderBytes: configuration.maxHeaderBytes,
            maxHeaderCount: configuration.maxHeaderCount, maxBodyBytes: configuration.maxBodyBytes)
        self.timeouts = .init(
            head: configuration.headDeadline, body: configuration.bodyDeadline, idle: configuration.idleTimeout,
            write: configuration.writeDeadline, linger: min(.seconds(2), configuration.writeDeadline))
        let shortest = [
            configuration.headDeadline, configuration.bodyDeadline, configuration.idleTimeout,
            configuration.writeDeadline, configuration.drainTimeout,
        ].min()!
        self.tick = min(max(shortest / 10, .milliseconds(5)), .milliseconds(250))
        self.readBuffer = .allocate(capacity: 64 * 1024)
        self.events = .allocate(capacity: 256)
        self.events.initialize(repeating: epoll_event())
        self.nextHeartbeat = clock.now.advanced(by: core.eventStreams?.configuration.heartbeatInterval ?? .seconds(15))
    }

    deinit {
        readBuffer.deallocate()
        events.deallocate()
    }

    // MARK: - Loop

    /// Runs until shutdown has drained; closes every connection and the listener before returning.
    /// - Returns: descriptors of connections still in a worker, shut down but not closed: the caller
    ///   closes them once the workers have stopped.
    func run() -> [Int32] {
        let tickMilliseconds = Int32(tick.milliseconds)
        var nextTimerCheck = clock.now.advanced(by: tick)
        while true {
            let needsTimer = connectionCount > 0 || drainDeadline != nil || acceptPausedUntil != nil
            let count: Int
            do {
                count = try System.epollWait(epollFD, events, timeoutMilliseconds: needsTimer ? tickMilliseconds : -1)
            } catch {
                logger.critical("event loop failed", metadata: ["error": "\(error)"])
                break
            }
            let now = clock.now
            for index in 0..<count {
                let event = events[index]
                let fd = Int32(truncatingIfNeeded: event.data.u64)
                if fd == eventFD {
                    System.eventfdDrain(eventFD)
                    handleCompletions(now: now)
                    deliverStreamEvents(now: now)
                    if drainDeadline == nil, core.shutdownRequested.load(ordering: .acquiring) {
                        beginDrain(now: now)
                    }
                } else if fd == listenFD {
                    acceptConnections(now: now)
                } else if let connection = connection(for: fd) {
                    handle(connection, events: event.events, now: now)
                }
            }
            if now >= nextTimerCheck {
                checkTimers(now: now)
                nextTimerCheck = now.advanced(by: tick)
            }
            if now >= nextHeartbeat, let streams = core.eventStreams {
                sendHeartbeats(now: now)
                nextHeartbeat = now.advanced(by: streams.configuration.heartbeatInterval)
            }
            if let drainDeadline, connectionCount == 0 || now >= drainDeadline { break }
        }
        var abandoned: [Int32] = []
        for connection in connections.compactMap({ $0 }) {
            if connection.handoff.isIdle {
                close(connection)
            } else {
                // A worker may still write: end the TCP connection but keep the descriptor number.
                System.shutdownReadWrite(connection.fd)
                abandoned.append(connection.fd)
                forget(connection)
            }
        }
        closeListener()
        return abandoned
    }

    private func connection(for fd: Int32) -> Connection? {
        Int(fd) < connections.count ? connections[Int(fd)] : nil
    }

    // MARK: - Accepting

    private func acceptConnections(now: ContinuousClock.Instant) {
        while let listenFD {
            let accepted: AcceptedConnection
            do {
                guard case .processed(let (fd, peerAddress)) = try System.accept(listenFD) else { return }
                // A place under the process's limit is taken here; the loop that cannot find room gives it back.
                let open = core.openConnections.add(1, ordering: .relaxed).newValue
                accepted = AcceptedConnection(
                    fd: fd, peerAddress: peerAddress, needsRoom: open > configuration.maxConnections)
            } catch {
                if System.isTransientAcceptError(error) {
                    continue
                } else {
                    // EMFILE, ENFILE, ENOBUFS, ENOMEM: stop accepting for a moment instead of spinning.
                    logger.error("accept failed; pausing", metadata: ["error": "\(error)"])
                    System.epollRemove(epollFD, listenFD)
                    acceptPausedUntil = now.advanced(by: .milliseconds(100))
                    return
                }
            }
            // At the limit the search for room (``makeRoom(for:now:)``) starts on this loop.
            let target = accepted.needsRoom ? peer : leastLoadedLoop()
            if target === peer {
                adopt(accepted, now: now)
            } else {
                target.mailbox.post(accepted)
            }
        }
    }

    /// The loop serving fewest connections, counted as serving one more; ties go round robin.
    private func leastLoadedLoop() -> LoopPeer {
        let loops = core.loops
        var best = loops[nextLoop % loops.count]
        var fewest = best.openConnections.load(ordering: .relaxed)
        for step in 1..<loops.count where fewest > 0 {
            let candidate = loops[(nextLoop + step) % loops.count]
            let count = candidate.openConnections.load(ordering: .relaxed)
            if count < fewest {
                best = candidate
                fewest = count
            }
        }
        nextLoop = (best.index + 1) % loops.count
        // Counted now, not when the loop takes it: the next accept already sees it.
        best.openConnections.add(1, ordering: .relaxed)
        return best
    }

    /// Starts serving an accepted connection. At the connection limit an idle keep-alive
    /// connection makes room first (``makeRoom(for:now:)``), so idle connections held open by one
    /// client never lock everyone else out.
    private func adopt(_ accepted: AcceptedConnection, now: ContinuousClock.Instant) {
        // The acceptor counted it here already (``leastLoadedLoop()``); counted again below once served.
        if !accepted.needsRoom { peer.openConnections.subtract(1, ordering: .relaxed) }
        if drainDeadline != nil {
            refuse(accepted)
            return
        }
        if accepted.needsRoom, !makeRoom(for: accepted, now: now) { return }
        let fd = accepted.fd
        let interest = System.epollIn | System.epollOut | System.epollRdHup | System.epollEdgeTriggered
        do {
            try System.epollAdd(epollFD, fd, events: interest)
        } catch {
            logger.error("epoll_ctl failed", metadata: ["error": "\(error)"])
            refuse(accepted)
            return
        }
        nextConnectionID += 1
        let connection = Connection(
            fd: fd, id: nextConnectionID, peerAddress: accepted.peerAddress,
            machine: .init(now: now, timeouts: timeouts), limits: limits)
        if Int(fd) >= connections.count {
            connections.append(
                contentsOf: repeatElement(nil, count: max(Int(fd) + 1 - connections.count, connections.count)))
            classifiedHeads.grow(to: connections.count)
        }
        connections[Int(fd)] = connection
        connectionCount += 1
        peer.openConnections.add(1, ordering: .relaxed)
    }

    /// Closes an accepted connection this server will not serve, giving its place back.
    private func refuse(_ accepted: AcceptedConnection) {
        core.openConnections.subtract(1, ordering: .relaxed)
        System.close(accepted.fd)
    }

    /// Finds room for a connection that came at the limit: the keep-alive connection idle the
    /// longest of the whole process is closed. The newcomer visits every loop once, each noting
    /// its own candidate if it is older than the one noted, and then goes to the loop of the
    /// oldest, which closes it (or, if that one became busy meanwhile, its oldest idle one now)
    /// and takes the newcomer. With no idle connection anywhere the newcomer is closed.
    /// - Returns: whether the newcomer may be served here now; if not, it was passed on or closed.
    private func makeRoom(for accepted: AcceptedConnection, now: ContinuousClock.Instant) -> Bool {
        let loops = core.loops
        if accepted.loopsAsked >= loops.count {
            // The loop the survey chose.
            guard closeOldestIdleConnection(now: now) else {
                refuse(accepted)
                return false
            }
            return true
        }
        var passed = accepted
        if let mine = oldestIdleConnection(now: now)?.lastRequestAt,
            passed.oldestIdle.map({ mine < $0.lastRequestAt }) ?? true
        {
            passed.oldestIdle = (peer.index, mine)
        }
        passed.loopsAsked += 1
        if passed.loopsAsked < loops.count {
            loops[(peer.index + 1) % loops.count].mailbox.post(passed)
            return false
        }
        guard let chosen = passed.oldestIdle else {
            refuse(accepted)
            return false
        }
        if chosen.loop == peer.index { return makeRoom(for: passed, now: now) }
        loops[chosen.loop].mailbox.post(passed)
        return false
    }

    /// The keep-alive connection idle the longest (whose last request came first: every loop's
    /// clock agrees on that, not on when each loop saw a worker's direct write end), if there is
    /// one; a new connection still waiting for its first request is not idle in this sense.
    private func oldestIdleConnection(now: ContinuousClock.Instant) -> Connection? {
        var oldest: Connection?
        for case let connection? in connections where connection.requestsDispatched > 0 && connection.handoff.isIdle {
            // A worker that wrote its response itself left the connection "processing" until the
            // next tick; it is idle now.
            if connection.machine.state == .processing { resumeAfterDirectWrite(connection, now: now) }
            guard connection.isOpen, connection.machine.isIdle, let last = connection.lastRequestAt else { continue }
            if oldest?.lastRequestAt.map({ last < $0 }) ?? true { oldest = connection }
        }
        return oldest
    }

    private func closeOldestIdleConnection(now: ContinuousClock.Instant) -> Bool {
        guard let oldest = oldestIdleConnection(now: now) else { return false }
        core.idleClosedForRoom.add(1, ordering: .relaxed)
        close(oldest)
        return true
    }

    private func closeListener() {
        guard let listenFD else { return }
        System.epollRemove(epollFD, listenFD)
        System.close(listenFD)
        self.listenFD = nil
    }

    // MARK: - Connection events

    private func handle(_ connection: Connection, events: UInt32, now: ContinuousClock.Instant) {
        if events & System.epollErr != 0 { connection.failed = true }
        if events & (System.epollIn | System.epollRdHup | System.epollHup) != 0 { connection.mayRead = true }
        if connection.machine.state == .processing {
            // A worker may be writing the socket: only remember the readiness and ask to hear back.
            if connection.handoff.watch() { resumeAfterDirectWrite(connection, now: now) }
            return
        }
        if connection.failed {
            close(connection)
            return
        }
        if events & System.epollOut != 0, connection.hasPendingOutput {
            flush(connection, now: now)
        }
        drive(connection, now: now)
    }

    /// Reads and parses as long as the connection is in a reading phase and bytes are available.
    func drive(_ connection: Connection, now: ContinuousClock.Instant) {
        while connection.isOpen {
            if case .lingering = connection.machine.state {
                discardInput(connection, upTo: maxLingerBytes)
                return
            }
            if connection.machine.isStreaming {
                // A stream's client sends nothing we need: drop its input, and close at EOF.
                discardInput(connection, upTo: nil)
                return
            }
            guard connection.machine.isReading else { return }
            if !connection.pending.isEmpty {
                var pending: [UInt8] = []
                swap(&pending, &connection.pending)
                let consumed = pending.withUnsafeBufferPointer { process(connection, $0, now: now) }
                if consumed < pending.count, connection.isOpen {
                    connection.pending = Array(pending[consumed...])
                }
                continue
            }
            guard connection.mayRead else { return }
            let count: Int
            do {
                guard case .processed(let read) = try System.read(connection.fd, into: readBuffer) else {
                    connection.mayRead = false
                    return
                }
                count = read
            } catch {
                close(connection)
                return
            }
            if count == 0 {
                // EOF while reading: an unfinished request can never complete.
                connection.peerClosed = true
                close(connection)
                return
            }
            // A short read drained the socket; edge-triggered epoll reports the next arrival.
            if count < readBuffer.count { connection.mayRead = false }
            let chunk = UnsafeBufferPointer(rebasing: readBuffer[0..<count])
            let consumed = process(connection, chunk, now: now)
            if consumed < count, connection.isOpen {
                connection.pending = Array(UnsafeBufferPointer(rebasing: chunk[consumed...]))
            }
        }
    }

    /// Parses `bytes` until they run out or a request goes to a worker; returns the bytes consumed.
    private func process(
        _ connection: Connection, _ bytes: UnsafeBufferPointer<UInt8>, now: ContinuousClock.Instant
    ) -> Int {
        var offset = 0
        while offset < bytes.count, connection.isOpen, connection.machine.isReading {
            let consumed: Int
            let event: HTTPRequestParser.Event
            do {
                (consumed, event) = try connection.parser.parse(UnsafeBufferPointer(rebasing: bytes[offset...]))
            } catch {
                logger.debug(
                    "bad request", metadata: ["code": "\(error.code.rawValue)", "status": "\(error.status.code)"])
                let response = HTTPResponse.problem(error.status, detail: error.detail)
                startResponse(
                    connection, encode(response, isHead: false, connection: .close), closeAfter: true, now: now)
                return bytes.count
            }
            if consumed > 0 { connection.machine.receivedRequestBytes(now: now) }
            offset += consumed
            switch event {
            case .needMoreData:
                break
            case .head(let expectsContinue):
                connection.machine.headCompleted(now: now)
                guard classifyHead(of: connection, now: now) else { return bytes.count }
                if expectsContinue {
                    connection.output.append(contentsOf: HTTPResponseEncoder.continueHead)
                    flush(connection, now: now)
                }
            case .request(let request, let keepAlive):
                guard dispatch(connection, request, keepAlive: keepAlive, pipelined: offset < bytes.count, now: now)
                else { return bytes.count }
            }
        }
        return offset
    }

    /// Classifies the head of a request whose body follows; false when the responder refused it:
    /// the body is never read (nor `100 Continue` sent), and the connection closes after the answer.
    /// Not in `process`, which runs on every read: unspecialized, a function that holds a verdict
    /// looks up the verdict's type each time it runs.
    private func classifyHead(of connection: Connection, now: ContinuousClock.Instant) -> Bool {
        var head = connection.parser.headOfCurrentRequest
        head.peerAddress = connection.peerAddress
        switch core.classify(head, true) {
        case .accept(let classified, let toBatchLane):
            classifiedHeads.put(classified, at: Int(connection.fd))
            connection.headToBatchLane = toBatchLane
            return true
        case .refuse(let refusal):
            refuse(connection, refusal, now: now)
            return false
        }
    }

    /// Hands a request to a worker; false when the responder refused it (the connection closes).
    /// - Parameter pipelined: bytes of a further request follow in the buffer being parsed.
    private func dispatch(
        _ connection: Connection, _ request: HTTPRequest, keepAlive: Bool, pipelined: Bool,
        now: ContinuousClock.Instant
    ) -> Bool {
        var request = request
        request.peerAddress = connection.peerAddress
        // Classified once: on its head when a body followed, else now.
        let classified: Classified
        let toBatchLane: Bool
        if let headToBatchLane = connection.headToBatchLane {
            connection.headToBatchLane = nil
            classified = classifiedHeads.take(at: Int(connection.fd))
            toBatchLane = headToBatchLane
        } else {
            switch core.classify(request, false) {
            case .accept(let value, let lane):
                classified = value
                toBatchLane = lane
            case .refuse(let refusal):
                refuse(connection, refusal, now: now)
                return false
            }
        }
        connection.machine.requestDispatched()
        connection.requestsDispatched += 1
        connection.lastRequestAt = now
        // With bytes buffered or possibly unread, the loop must hear when the response is out.
        connection.handoff.dispatch(watched: pipelined || connection.mayRead)
        peer.requests.add(1, ordering: .relaxed)
        let ticket = ConnectionTicket(
            fd: connection.fd, connectionID: connection.id, loop: peer.index, keepAlive: keepAlive,
            handoff: connection.handoff, mayWriteDirectly: !connection.hasPendingOutput)
        // The batch lane first, when the responder wants it there; the other workers take it
        // when the lane's queue is full.
        let queued =
            if toBatchLane, let lane, lane.tryEnqueue(request, classified, connection: ticket) {
                true
            } else {
                core.queue.tryEnqueue(request, classified, connection: ticket)
            }
        if !queued { refuseAtCapacity(request, keepAlive: keepAlive, connection, now: now) }
        return true
    }

    /// Answers a request the responder refused on its head and closes the connection after it.
    private func refuse(_ connection: Connection, _ refusal: HTTPResponse, now: ContinuousClock.Instant) {
        startResponse(connection, encode(refusal, isHead: false, connection: .close), closeAfter: true, now: now)
    }

    private func refuseAtCapacity(
        _ request: HTTPRequest, keepAlive: Bool, _ connection: Connection, now: ContinuousClock.Instant
    ) {
        connection.handoff.reclaim()
        core.refusedAtCapacity.add(1, ordering: .relaxed)
        let close = !keepAlive || core.draining.load(ordering: .relaxed)
        let header = HTTPResponseEncoder.ConnectionHeader(close: close, version: request.version)
        startResponse(
            connection, encode(.atCapacity, isHead: request.method == .head, connection: header),
            closeAfter: close, now: now)
    }

    func encode(
        _ response: HTTPResponse, isHead: Bool, connection: HTTPResponseEncoder.ConnectionHeader
    ) -> [UInt8] {
        HTTPResponseEncoder.encode(
            response, date: dateCache.current(), isHeadResponse: isHead, connection: connection)
    }

    // MARK: - Writing

    private func handleCompletions(now: ContinuousClock.Instant) {
        peer.mailbox.take(into: &completions, connections: &handedOver)
        for accepted in handedOver { adopt(accepted, now: now) }
        handedOver.removeAll(keepingCapacity: true)
        for completion in completions {
            guard let connection = connection(for: completion.fd), connection.id == completion.connectionID,
                connection.machine.state == .processing
            else {
                if case .stream(_, let stream) = completion.kind {
                    core.eventStreams?.release(topics: stream.subscriptions.map(\.topic), client: stream.client)
                }
                continue
            }
            switch completion.kind {
            case .response(let bytes, let closeAfter):
                connection.handoff.reclaim()
                if connection.failed {
                    close(connection)
                    continue
                }
                startResponse(connection, bytes, closeAfter: closeAfter, now: now)
                drive(connection, now: now)
            case .failed:
                connection.handoff.reclaim()
                close(connection)
            case .stream(let bytes, let stream):
                connection.handoff.reclaim()
                startStream(connection, bytes, stream, now: now)
            case .written:
                // Already resumed (and possibly in a worker again) if not idle.
                if connection.handoff.isIdle { resumeAfterDirectWrite(connection, now: now) }
            }
        }
        completions.removeAll(keepingCapacity: true)
    }

    func startResponse(
        _ connection: Connection, _ bytes: [UInt8], closeAfter: Bool, now: ContinuousClock.Instant
    ) {
        connection.machine.responseStarted(now: now, closeAfter: closeAfter)
        if connection.hasPendingOutput {
            connection.output.append(contentsOf: bytes)
        } else {
            connection.output = bytes
            connection.outputOffset = 0
        }
        flush(connection, now: now)
    }

    /// Writes pending output; on completion tells the state machine and acts on its answer.
    func flush(_ connection: Connection, now: ContinuousClock.Instant) {
        while connection.outputOffset < connection.output.count {
            let result: IOResult<Int>
            do {
                let offset = connection.outputOffset
                result = try connection.output.withUnsafeBytes { bytes throws(IOError) in
                    try System.send(connection.fd, UnsafeRawBufferPointer(rebasing: bytes[offset...]))
                }
            } catch {
                close(connection)
                return
            }
            guard case .processed(let written) = result else { return }  // EPOLLOUT resumes
            connection.outputOffset += written
        }
        connection.output = []
        connection.outputOffset = 0
        apply(connection.machine.responseWritten(now: now), to: connection)
    }

    private func apply(_ action: ConnectionStateMachine<ContinuousClock.Instant>.Action, to connection: Connection) {
        switch action {
        case .none, .sendRequestTimeout:
            break
        case .close:
            close(connection)
        case .linger:
            if connection.peerClosed {
                close(connection)
            } else {
                System.shutdownWrite(connection.fd)
                connection.mayRead = true
                connection.pending = []
            }
        }
    }

    /// The worker wrote the response itself and gave the connection back (``Handoff/isIdle``):
    /// back to reading, or closed if shutting down or the socket failed meanwhile.
    private func resumeAfterDirectWrite(_ connection: Connection, now: ContinuousClock.Instant) {
        apply(connection.machine.responseWrittenByWorker(now: now), to: connection)
        if connection.failed {
            close(connection)
            return
        }
        drive(connection, now: now)
    }

    /// Reads and drops input until EOF (then closes), or until `limit` bytes were dropped. A
    /// lingering close does so, so the client reads the response rather than a reset.
    private func discardInput(_ connection: Connection, upTo limit: Int?) {
        while connection.mayRead {
            do {
                guard case .processed(let count) = try System.read(connection.fd, into: readBuffer) else {
                    connection.mayRead = false
                    return
                }
                connection.lingerBytes += count
                if count == 0 { connection.peerClosed = true }
                if count == 0 || connection.lingerBytes > limit ?? .max {
                    close(connection)
                    return
                }
            } catch {
                close(connection)
                return
            }
        }
    }

    func close(_ connection: Connection) {
        guard connection.isOpen else { return }
        precondition(connection.handoff.isIdle, "closing connection \(connection.id) while its request is in a worker")
        System.close(connection.fd)
        forget(connection)
    }

    /// Runs `body` on every open event stream (a stream of many topics once).
    func forEachStream(_ body: (Connection) -> Void) {
        for case let connection? in connections where connection.isOpen && connection.stream != nil {
            body(connection)
        }
    }

    /// Removes `connection` from the table without closing its descriptor.
    private func forget(_ connection: Connection) {
        removeStream(connection)
        if connection.headToBatchLane != nil {
            connection.headToBatchLane = nil
            classifiedHeads.discard(at: Int(connection.fd))
        }
        connection.isOpen = false
        connection.machine.closed()
        connections[Int(connection.fd)] = nil
        connectionCount -= 1
        peer.openConnections.subtract(1, ordering: .relaxed)
        core.openConnections.subtract(1, ordering: .relaxed)
    }

    // MARK: - Timers and shutdown

    private func checkTimers(now: ContinuousClock.Instant) {
        if let until = acceptPausedUntil, now >= until {
            acceptPausedUntil = nil
            if let listenFD { try? System.epollAdd(epollFD, listenFD, events: System.epollIn) }
        }
        for case let connection? in connections {
            if let endsAt = connection.stream?.endsAt, now >= endsAt {
                endStream(connection, now: now)
                continue
            }
            if connection.machine.state == .processing {
                // No deadline runs while a worker has the request; a direct write ends it here at
                // the latest (the idle deadline then starts up to one tick late).
                if connection.handoff.isIdle { resumeAfterDirectWrite(connection, now: now) }
                continue
            }
            switch connection.machine.timerFired(now: now) {
            case .none, .linger:
                break
            case .close:
                close(connection)
            case .sendRequestTimeout:
                let response = HTTPResponse.problem(.requestTimeout, detail: "the request was not received in time")
                connection.pending = []
                startResponse(
                    connection, encode(response, isHead: false, connection: .close), closeAfter: true, now: now)
            }
        }
    }

    private func beginDrain(now: ContinuousClock.Instant) {
        core.draining.store(true, ordering: .releasing)
        drainDeadline = now.advanced(by: configuration.drainTimeout)
        closeListener()
        for case let connection? in connections {
            if connection.machine.beginShutdown() == .close {
                close(connection)
            } else if connection.machine.state == .processing, connection.handoff.watch() {
                resumeAfterDirectWrite(connection, now: now)
            }
        }
        logger.info("draining", metadata: ["connections": "\(connectionCount)"])
    }

}

/// Bytes discarded at most while lingering before a close.
private let maxLingerBytes = 1 << 20

extension HTTPResponse {
    /// The answer to a request no worker can take: every queue is full.
    static var atCapacity: HTTPResponse {
        .problem(.serviceUnavailable, detail: "the server is at capacity; retry shortly", headers: ["Retry-After": "1"])
    }
}

extension HTTPResponseEncoder.ConnectionHeader {
    /// The `Connection` field of a response that closes the connection after it, or not.
    init(close: Bool, version: HTTPVersion) {
        if close {
            self = .close
        } else {
            self = version == .http1_0 ? .keepAlive : .none
        }
    }
}
