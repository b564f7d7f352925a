import Foundation
import Synchronization

extension ProfileClient {
    /// Follows `id`'s event stream until cancelled: each `profile` event goes through the local
    /// cache like a fetch (an older version never replaces a newer one) and becomes the id's
    /// `min_version` for later reads. Reconnects as ``followEventStream`` does, with
    /// `Last-Event-ID`, so nothing committed meanwhile is missed. A 404, 401 or 403 ends following;
    /// 503 waits for `Retry-After`.
    ///
    /// Static, so the following task does not keep the client alive: releasing the client
    /// cancels it.
    static func follow(
        id: Int64, transport: any EventStreamTransport, configuration: ProfileClientConfiguration,
        cache: LocalProfileCache, randomUnit: @escaping @Sendable () -> Double
    ) async {
        guard let url = URL(string: "/users/profile/\(id)/events", relativeTo: configuration.baseURL)?.absoluteURL
        else { return }
        let lastVersion = Mutex<Int32?>(nil)
        _ = await followEventStream(
            transport: transport, configuration: configuration, randomUnit: randomUnit,
            finalStatuses: [400, 401, 403, 404],
            makeRequest: {
                var headers = ["Accept": "text/event-stream"]
                if let known = lastVersion.withLock({ $0 }) { headers["Last-Event-ID"] = String(known) }
                return (url, headers)
            },
            onEvents: { [cache] events in
                for event in events {
                    guard case .profile(let profile)? = ProfileStreamEvent(event), profile.id == id else { continue }
                    lastVersion.withLock { $0 = max($0 ?? 0, profile.version) }
                    await cache.didReceiveEvent(profile)
                }
            })
    }
}

/// Which ids this client follows, and the task that follows each while anyone observes it.
final class LiveSubscriptions: Sendable {
    private struct Entry {
        var observers: Int
        var task: Task<Void, Never>?
    }

    private let entries = Mutex<[Int64: Entry]>([:])

    /// One more observer of `id`; the first starts following with `start`.
    func retain(_ id: Int64, start: () -> Task<Void, Never>) {
        entries.withLock { entries in
            if entries[id] != nil {
                entries[id]!.observers += 1
            } else {
                entries[id] = Entry(observers: 1, task: start())
            }
        }
    }

    /// One observer of `id` less; the last one stops following.
    func release(_ id: Int64) {
        let task = entries.withLock { entries -> Task<Void, Never>? in
            guard var entry = entries[id] else { return nil }
            entry.observers -= 1
            if entry.observers > 0 {
                entries[id] = entry
                return nil
            }
            entries[id] = nil
            return entry.task
        }
        task?.cancel()
    }

    func cancelAll() {
        let tasks = entries.withLock { entries in
            defer { entries = [:] }
            return entries.values.compactMap(\.task)
        }
        for task in tasks { task.cancel() }
    }
}
