import CLinuxShims
import HTTP1
import Logging
import ServiceRuntime
import Synchronization

// The event-stream fan-out of the loop (docs/design.md §4): streams registered by topic, events
// delivered to every stream of their topic, heartbeats, and a stream's end. The loop's own state
// for it is `streamTopics`, `streamCount`, `streamEvents` and `nextHeartbeat`.
extension EventLoop {
    /// Registers the connection as a stream of `stream.topic` and writes its first bytes, followed
    /// by the topic's latest event when that is newer than what the worker read; or answers 503 when
    /// the subscriber limit is reached or the server is draining.
    func startStream(
        _ connection: Connection, _ bytes: [UInt8], _ stream: HTTPResponse.EventStream, now: ContinuousClock.Instant
    ) {
        guard let streams = core.eventStreams else {
            preconditionFailure("an event-stream response on a server without EventStreams")
        }
        if connection.failed {
            streams.release(topic: stream.topic, client: stream.client)
            close(connection)
            return
        }
        guard streamCount < streams.configuration.maxSubscribers, drainDeadline == nil else {
            streams.release(topic: stream.topic, client: stream.client)
            if drainDeadline == nil { streams.refused.add(1, ordering: .relaxed) }
            let retryAfter = String(streams.configuration.retryAfterSeconds)
            let response = HTTPResponse.problem(
                .serviceUnavailable, detail: "too many event streams are open; retry shortly",
                headers: ["Retry-After": retryAfter])
            startResponse(connection, encode(response, isHead: false, connection: .close), closeAfter: true, now: now)
            drive(connection, now: now)
            return
        }
        connection.machine.streamStarted()
        // Nothing more is parsed on a stream: drop what the parser and pipelining held.
        connection.parser = HTTPRequestParser(limits: limits)
        connection.pending = []
        connection.streamTopic = stream.topic
        connection.streamPosition = stream.position
        connection.streamClient = stream.client
        connection.streamEndsAt = stream.endsAt
        var list = streamTopics.removeValue(forKey: stream.topic) ?? []
        connection.streamIndex = list.count
        list.append(connection)
        streamTopics[stream.topic] = list
        streamCount += 1
        streams.subscribers.add(1, ordering: .relaxed)
        System.setSendBufferSize(connection.fd, bytes: streams.configuration.socketSendBufferBytes)
        connection.output = bytes
        connection.outputOffset = 0
        // An event published while the worker read the first state (the topic was retained first).
        if let latest = streams.latestEvent(topic: stream.topic), latest.position > stream.position {
            if latest.closesStreams {
                // What the stream follows was deleted meanwhile: the head goes out, then the end.
                flush(connection, now: now)
                close(connection)
                return
            }
            connection.output.append(contentsOf: latest.bytes)
            connection.streamPosition = latest.position
            streams.eventsSent.add(1, ordering: .relaxed)
        }
        flush(connection, now: now)
        drive(connection, now: now)
    }

    /// Writes the published events to the streams of their topics, skipping streams already at or
    /// past an event's position.
    func deliverStreamEvents(now: ContinuousClock.Instant) {
        guard let streams = core.eventStreams else { return }
        streams.takeEvents(into: &streamEvents)
        guard !streamEvents.isEmpty else { return }
        var sent = 0
        for event in streamEvents {
            guard let list = streamTopics[event.topic] else { continue }
            if event.closesStreams {
                for connection in list where connection.isOpen { close(connection) }
                continue
            }
            for connection in list where connection.isOpen && connection.streamPosition < event.position {
                connection.streamPosition = event.position
                if send(event.bytes, onStream: connection, now: now) { sent += 1 }
            }
        }
        streamEvents.removeAll(keepingCapacity: true)
        streams.eventsSent.add(sent, ordering: .relaxed)
    }

    /// Ends a stream at its ``HTTP1/HTTPResponse/EventStream/endsAt`` (its lifetime, or the
    /// token that opened it expired) with a last comment; the client reconnects with
    /// `Last-Event-ID` and misses nothing.
    func endStream(_ connection: Connection, now: ContinuousClock.Instant) {
        connection.streamEndsAt = nil
        core.eventStreams?.ended.add(1, ordering: .relaxed)
        send(Self.streamEnd, onStream: connection, now: now)
        if connection.isOpen { close(connection) }
    }

    func sendHeartbeats(now: ContinuousClock.Instant) {
        for list in streamTopics.values {
            for connection in list where connection.isOpen {
                send(Self.heartbeat, onStream: connection, now: now)
            }
        }
    }

    /// Queues `bytes` on a stream and writes what the socket takes; cuts the stream instead when
    /// its unsent bytes would exceed the bound (its reader stopped or is too slow).
    /// - Returns: false when the stream was cut or failed.
    @discardableResult
    func send(_ bytes: [UInt8], onStream connection: Connection, now: ContinuousClock.Instant) -> Bool {
        guard let streams = core.eventStreams else { return false }
        if connection.pendingOutputCount + bytes.count > streams.configuration.maxBufferedBytes {
            streams.cutAsSlow.add(1, ordering: .relaxed)
            logger.debug("event stream cut: its reader is too slow", metadata: ["connection": "\(connection.id)"])
            close(connection)
            return false
        }
        if connection.hasPendingOutput {
            // The socket is full; edge-triggered EPOLLOUT resumes the write.
            if connection.outputOffset > 0 {
                connection.output.removeFirst(connection.outputOffset)
                connection.outputOffset = 0
            }
            connection.output.append(contentsOf: bytes)
            return true
        }
        connection.output = bytes
        connection.outputOffset = 0
        flush(connection, now: now)
        return connection.isOpen
    }

    func removeStream(_ connection: Connection, topic: Int64) {
        if var list = streamTopics.removeValue(forKey: topic) {
            let index = connection.streamIndex
            if index < list.count, list[index] === connection {
                let last = list.removeLast()
                if index < list.count {
                    list[index] = last
                    last.streamIndex = index
                }
            }
            if !list.isEmpty { streamTopics[topic] = list }
        }
        connection.streamTopic = nil
        streamCount -= 1
        core.eventStreams?.subscribers.subtract(1, ordering: .relaxed)
        core.eventStreams?.release(topic: topic, client: connection.streamClient)
        connection.streamClient = nil
    }
}
