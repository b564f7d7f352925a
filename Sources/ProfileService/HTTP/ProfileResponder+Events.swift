import Foundation
import HTTP1
import HTTPServer
import ProfileAuth

extension ProfileResponder {
    /// `GET /users/profile/{id}/events` (or `GET /users/profile/{id}` with
    /// `Accept: text/event-stream`): the profile's live updates as Server-Sent Events.
    ///
    /// Same read rules as `GET`. The answer's first bytes are a `retry:` hint and the current
    /// profile, unless `Last-Event-ID` is at or above its version; the server then keeps the
    /// connection and writes each newer version (docs/design.md §4).
    ///
    /// One client (a token's subject, else its address: ``ClientIdentity``) has at most
    /// `maxSubscribersPerClient` streams open (429 beyond), and a stream ends after its lifetime
    /// or when the token that opened it expires (docs/design.md §5.5). `stream` is what its head
    /// asked (authorized, its id and `Last-Event-ID` parsed).
    func openEventStream(_ stream: ProfileStreamRead, _ request: HTTPRequest, worker: ProfileWorker) throws(Problem) -> HTTPResponse {
        let (id, lastEventID, token) = (stream.id, stream.lastEventID, stream.token)
        let view = stream.reader.view(of: id)
        let (liveUpdates, client) = try reserveStream(request, token: token)
        let streams = liveUpdates.streams
        // Watched before the read: a change committed meanwhile reaches the stream (EventStreams).
        streams.retain(topic: id)
        var handedOver = false
        defer { if !handedOver { streams.release(topic: id, client: client) } }
        let representation: ProfileRepository.Representation?
        do {
            // Never older than what the client has seen already.
            representation = try worker.repository.read(id: id, minVersion: lastEventID.flatMap { $0 > 0 ? $0 : nil })
        } catch {
            throw Self.problem(for: error)
        }
        guard let representation else { throw .notFound(id) }
        var body = ProfileEvent.retryHint(milliseconds: liveUpdates.retryMilliseconds)
        if (lastEventID ?? 0) < representation.version {
            body += ProfileEvent.bytes(version: representation.version, json: representation.json.view(view))
        }
        var response = Self.eventStreamResponse(body: body)
        response.headers.add(name: "X-Cache", value: representation.cacheOutcome.rawValue)
        Self.viewHeaders(representation.json, view, into: &response.headers)
        response.eventStream = .init(
            topic: id, position: Int64(max(representation.version, lastEventID ?? 0)), receivesRestricted: view == .owner,
            client: client,
            endsAt: streamEnd(configuration: streams.configuration, token: token))
        handedOver = true
        return response
    }

    /// `GET /users/profiles/events?ids=3@7,1,2`: one event stream for the profiles of a list (up
    /// to 1,000 ids, the syntax of `GET /users/profiles`). Its first bytes are a `retry:` hint and,
    /// in the order asked, each member newer than its floor as a `profile` event, or a `deleted`
    /// event for one that does not exist; then each newer version of any member, and a `deleted`
    /// event when one is deleted — the stream goes on (docs/design.md §4.1).
    ///
    /// `Last-Event-ID` is not read here: one id cannot say where a list stands. A client resumes
    /// with floors (`ids=3@9,…`, the versions it holds) and misses nothing. Counts as one stream
    /// of its client; the server bounds the topics all streams follow together. `stream` is what
    /// its head asked (authorized, its ids parsed).
    func openListEventStream(
        _ stream: ProfileListStreamRead, _ request: HTTPRequest, worker: ProfileWorker
    ) throws(Problem) -> HTTPResponse {
        let (list, token) = (stream.list, stream.token)
        let (liveUpdates, client) = try reserveStream(request, token: token)
        let streams = liveUpdates.streams
        let ids = list.members.map(\.id)
        // Watched before the reads, as for one profile (EventStreams).
        streams.retain(topics: ids)
        var handedOver = false
        defer { if !handedOver { streams.release(topics: ids, client: client) } }

        var body = ProfileEvent.retryHint(milliseconds: liveUpdates.retryMilliseconds)
        var views = AnswerViews()
        var subscriptions: [HTTPResponse.EventStream.Subscription] = []
        subscriptions.reserveCapacity(ids.count)
        // In slices of a list request's size: the batched read's proven size (§2.7).
        for start in stride(from: 0, to: list.members.count, by: ProfileListRequest.maximumIDs) {
            let slice = Array(list.members[start..<min(start + ProfileListRequest.maximumIDs, list.members.count)])
            let answers: [ProfileRepository.Representation?]
            do {
                answers = try worker.repository.read(ProfileListRequest(members: slice))
            } catch {
                throw Self.problem(for: error)
            }
            for (member, answer) in zip(slice, answers) {
                let view = stream.reader.view(of: member.id)
                guard let answer else {
                    body += ProfileEvent.deleted(id: member.id, version: 0)  // its last version is not read here
                    subscriptions.append(.init(topic: member.id, position: 0, receivesRestricted: view == .owner))
                    continue
                }
                views.add(answer.json, view)
                let floor = member.floor ?? 0
                if answer.version > floor { body += ProfileEvent.bytes(version: answer.version, json: answer.json.view(view)) }
                subscriptions.append(
                    .init(topic: member.id, position: Int64(max(answer.version, floor)), receivesRestricted: view == .owner))
            }
        }
        var response = Self.eventStreamResponse(body: body)
        views.addHeaders(to: &response.headers)
        response.eventStream = .init(
            subscriptions: subscriptions, client: client,
            endsAt: streamEnd(configuration: streams.configuration, token: token))
        handedOver = true
        return response
    }

    /// The live updates, and one more stream counted for the request's client (429 beyond its
    /// limit); the caller gives the place back unless it hands a stream over.
    private func reserveStream(
        _ request: HTTPRequest, token: VerifiedToken?
    ) throws(Problem) -> (liveUpdates: ProfileUpdateHub, client: String) {
        guard let liveUpdates else {
            throw Problem(.noSuchRoute, detail: "live updates are not enabled on this server")
        }
        let streams = liveUpdates.streams
        let client = clientIdentity.key(for: request, token: token)
        guard streams.reserve(client: client) else {
            throw Problem(
                .tooManyStreams,
                detail: "this client has \(streams.configuration.maxSubscribersPerClient) event streams open already; "
                    + "close one first",
                headers: ["Retry-After": String(streams.configuration.retryAfterSeconds)])
        }
        return (liveUpdates, client)
    }

    private static func eventStreamResponse(body: [UInt8]) -> HTTPResponse {
        HTTPResponse(
            status: .ok,
            headers: ["Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"],
            body: body)
    }

    /// When the server ends a stream: its lifetime (less up to 10 %, so that the reconnections of
    /// streams opened together spread out), or the token's expiry plus the leeway, if sooner.
    private func streamEnd(configuration: EventStreams.Configuration, token: VerifiedToken?) -> ContinuousClock.Instant? {
        let now = ContinuousClock.now
        var end = configuration.maxLifetime.map { lifetime in
            now + lifetime - lifetime * Double.random(in: 0..<0.1)
        }
        if let expiresAt = token?.expiresAt {
            let remaining = Duration.milliseconds(Int64((expiresAt.timeIntervalSinceNow * 1000).rounded()))
            let tokenEnd = now + remaining + tokenLeeway
            end = min(end ?? tokenEnd, tokenEnd)
        }
        return end
    }

    /// `Last-Event-ID`: a version the client has, 0…2147483647 in canonical decimal (the `id`
    /// the stream sent; `openapi.yaml` states exactly this, so `5708148850` is refused by both).
    static func lastEventID(_ header: String?) throws(Problem) -> Int32? {
        guard let header else { return nil }
        let text = Substring(header.trimmed)
        guard let value = text == "0" ? 0 : canonicalPositive(text, as: Int32.self) else {
            throw Problem(
                .invalidLastEventID, detail: "Last-Event-ID must be a profile version, an integer from 0 to 2147483647",
                field: "Last-Event-ID")
        }
        return value
    }

    /// Whether the client asks for `text/event-stream` (RFC 9110 §12.5.1; parameters ignored).
    static func acceptsEventStream(_ request: HTTPRequest) -> Bool {
        // Every profile read asks: skip the parse when the value cannot name it (`*/*`,
        // `application/json` have no hyphen).
        guard let accept = request.headers["Accept"], accept.utf8.contains(UInt8(ascii: "-")) else { return false }
        return accept.split(separator: ",").contains { range in
            let mediaType = range.split(separator: ";", maxSplits: 1).first.map { $0.trimmed.lowercased() } ?? ""
            return mediaType == "text/event-stream"
        }
    }
}
