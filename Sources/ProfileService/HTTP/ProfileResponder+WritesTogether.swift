import HTTP1
import HTTPServer

/// Profile updates made together (docs/design.md §9.5): the batch lane hands on the updates it
/// finds queued as one group, and one worker makes them in one statement, with their
/// write-throughs' round trips shared; each request is then answered by the route as if alone.
extension ProfileResponder {
    /// A `PUT` under the profile route (not its event stream): cheap, for the event loop.
    static func isProfileWrite(_ request: HTTPRequest) -> Bool {
        request.method == .put && request.path.hasPrefix(profilePathPrefix) && !request.path.hasSuffix(eventsSuffix)
    }

    /// The display-name update a request asks for, when it is one a batch can make: a `PUT` of a
    /// valid body with the expected version (creations, and anything the route refuses, go alone).
    static func displayNameWrite(_ request: HTTPRequest) -> DisplayNameWrite? {
        guard isProfileWrite(request), let id = try? profileID(from: request.path),
            case .update(let displayName, let expectedVersion)? = try? writeRequest(of: request)
        else { return nil }
        return DisplayNameWrite(id: id, displayName: displayName, expectedVersion: expectedVersion)
    }

    /// Writes the updates among `requests` that their tokens allow together, then answers every
    /// request through the route, which finds its update made (``ProfileRepository/writingTogether(_:_:)``).
    func respond(writingTogether requests: [HTTPRequest], worker: ProfileWorker, answer: (Int, HTTPResponse) -> Void) {
        // Only what the route would make: a request it refuses makes no write here.
        let writes = requests.compactMap { request -> DisplayNameWrite? in
            guard (try? Self.refuseDuplicateAuthorization(request)) != nil, let write = Self.displayNameWrite(request),
                (try? authorizeWrite(request, id: write.id)) != nil
            else { return nil }
            return write
        }
        // Each answer is timed from the start of the batch it waited for.
        worker.batchStarted = .now
        defer { worker.batchStarted = nil }
        worker.repository.writingTogether(writes) {
            for (index, request) in requests.enumerated() { answer(index, respond(to: request, worker: worker)) }
        }
    }
}
