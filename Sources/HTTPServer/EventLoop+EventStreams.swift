import CLinuxShims
import HTTP1
import Logging
import ServiceRuntime
import Synchronization

// The event-stream fan-out of the loop (docs/design.md §4): streams registered by topic, events
// delivered to every stream of their topic, heartbeats, and a stream's end. The loop's own state
// for it is `streamTopics`, `streamEvents` and `nextHeartbeat`;
// each stream's own is its connection's `stream`. The limits on streams are the process's, kept in
// ``EventStreams``' counters, which every loop shares.
extension EventLoop {
    /// Registers the connection as a stream of each of `stream`'s topics and writes its first
    /// bytes, followed by each topic's latest event when that is newer than what the worker read;
    /// or answers 503 when the subscriber or subscription limit is reached or the server is draining.
    func startStream(
        _ connection: Connection, _ bytes: [UInt8], _ stream: HTTPResponse.EventStream, now: ContinuousClock.Instant
    ) {
        guard let streams = core.eventStreams else {
            preconditionFailure("an event-stream response on a server without EventStreams")
        }
        let topics = stream.subscriptions.map(\.topic)
        if connection.failed {
            streams.release(topics: topics, client: stream.client)
            close(connection)
            return
        }
        let limits = streams.configuration
        // The limits are the process's, over every loop: a place is taken first, then checked.
        let open = streams.subscribers.add(1, ordering: .relaxed).newValue
        let followed = streams.subscriptions.add(topics.count, ordering: .relaxed).newValue
        guard open <= limits.maxSubscribers, followed <= limits.maxSubscriptions, drainDeadline == nil else {
            streams.subscribers.subtract(1, ordering: .relaxed)
            streams.subscriptions.subtract(topics.count, ordering: .relaxed)
            streams.release(topics: topics, client: stream.client)
            if drainDeadline == nil { streams.refused.add(1, ordering: .relaxed) }
            let retryAfter = String(limits.retryAfterSeconds)
            let response = HTTPResponse.problem(
                .serviceUnavailable, detail: "too many event streams are open; retry shortly",
                headers: ["Retry-After": retryAfter])
            startResponse(connection, encode(response, isHead: false, connection: .close), closeAfter: true, now: now)
            drive(connection, now: now)
            return
        }
        connection.machine.streamStarted()
        // Nothing more is parsed on a stream: drop what the parser and pipelining held.
        connection.parser = HTTPRequestParser(limits: self.limits)
        connection.pending = []
        var state = StreamState(
            places: Dictionary(minimumCapacity: topics.count), endsWithTopic: stream.endsWithTopic,
            client: stream.client, endsAt: stream.endsAt, bufferLimit: limits.maxBufferedBytes + bytes.count)
        connection.output = bytes
        connection.outputOffset = 0
        var sent = 0
        var ended = false
        for subscription in stream.subscriptions {
            // Appended in place (the default-value subscript's modify: no copy of the list).
            var place = StreamState.Place(
                position: EventStreams.Event.rank(position: subscription.position),
                receivesRestricted: subscription.receivesRestricted, index: streamTopics[subscription.topic]?.count ?? 0)
            streamTopics[subscription.topic, default: []].append(connection)
            // An event published while the worker read the first state (the topic was retained first).
            if let latest = streams.latestEvent(topic: subscription.topic), latest.rank > place.position {
                place.position = latest.rank
                // What the stream follows was deleted meanwhile: the head goes out, the topic's
                // last event (`deleted`), then the end.
                if latest.closesStreams && stream.endsWithTopic { ended = true }
                connection.output.append(contentsOf: latest.bytes(restricted: place.receivesRestricted))
                sent += 1
            }
            state.places[subscription.topic] = place
        }
        connection.stream = state
        streams.eventsSent.add(sent, ordering: .relaxed)
        System.setSendBufferSize(connection.fd, bytes: limits.socketSendBufferBytes)
        flush(connection, now: now)
        if ended {
            close(connection)
            return
        }
        drive(connection, now: now)
    }

    /// Writes the published events to the streams of their topics, skipping streams already at or
    /// past an event's place; the end of a topic is the last event of its streams of one topic.
    func deliverStreamEvents(now: ContinuousClock.Instant) {
        guard let streams = core.eventStreams else { return }
        streams.takeEvents(loop: peer.index, into: &streamEvents)
        guard !streamEvents.isEmpty else { return }
        var sent = 0
        for event in streamEvents {
            guard let list = streamTopics[event.topic] else { continue }
            let rank = event.rank
            for connection in list where connection.isOpen {
                guard let place = connection.stream?.places[event.topic], place.position < rank else { continue }
                connection.stream?.places[event.topic]?.position = rank
                if send(event.bytes(restricted: place.receivesRestricted), onStream: connection, now: now) {
                    sent += 1
                    // The end of the topic: a stream of it alone has its last event, and ends.
                    if event.closesStreams && connection.stream?.endsWithTopic == true { close(connection) }
                }
            }
        }
        streamEvents.removeAll(keepingCapacity: true)
        streams.eventsSent.add(sent, ordering: .relaxed)
    }

    /// Ends a stream at its ``HTTP1/HTTPResponse/EventStream/endsAt`` (its lifetime, or the
    /// token that opened it expired) with a last comment; the client reconnects with
    /// `Last-Event-ID` and misses nothing.
    func endStream(_ connection: Connection, now: ContinuousClock.Instant) {
        connection.stream?.endsAt = nil
        core.eventStreams?.ended.add(1, ordering: .relaxed)
        send(EventStreams.streamEnd, onStream: connection, now: now)
        if connection.isOpen { close(connection) }
    }

    func sendHeartbeats(now: ContinuousClock.Instant) {
        forEachStream { connection in
            send(EventStreams.heartbeat, onStream: connection, now: now)
        }
    }

    /// Queues `bytes` on a stream and writes what the socket takes; cuts the stream instead when
    /// its unsent bytes would exceed the bound (its reader stopped or is too slow).
    /// - Returns: false when the stream was cut or failed.
    @discardableResult
    func send(_ bytes: [UInt8], onStream connection: Connection, now: ContinuousClock.Instant) -> Bool {
        guard let streams = core.eventStreams else { return false }
        let limit = connection.stream?.bufferLimit ?? streams.configuration.maxBufferedBytes
        if connection.pendingOutputCount + bytes.count > limit {
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

    /// Takes a closing connection out of the lists of every topic it follows and gives its
    /// topics and its client's place back.
    func removeStream(_ connection: Connection) {
        guard let state = connection.stream else { return }
        connection.stream = nil
        for (topic, place) in state.places {
            guard var list = streamTopics.removeValue(forKey: topic) else { continue }
            let index = place.index
            if index < list.count, list[index] === connection {
                let last = list.removeLast()
                if index < list.count {
                    list[index] = last
                    last.stream?.places[topic]?.index = index
                }
            }
            if !list.isEmpty { streamTopics[topic] = list }
        }
        core.eventStreams?.subscribers.subtract(1, ordering: .relaxed)
        core.eventStreams?.subscriptions.subtract(state.places.count, ordering: .relaxed)
        core.eventStreams?.release(topics: Array(state.places.keys), client: state.client)
    }
}

extension EventStreams {
    /// An SSE comment line: ignored by clients, seen by every proxy on the way.
    static let heartbeat: [UInt8] = Array(":\n\n".utf8)
    /// The last line of a stream the server ends on time: a comment, so clients only reconnect.
    static let streamEnd: [UInt8] = Array(": stream ends; reconnect with Last-Event-ID\n\n".utf8)
}
