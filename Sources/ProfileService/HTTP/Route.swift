public import HTTP1

/// The service's routes: the path templates `openapi.yaml` documents, the methods each answers,
/// and the `route` label of its metrics (never the raw path: ids would explode it).
/// `profile-service api-contract` prints them for `scripts/check-deploy.py`.
public enum Route: String, CaseIterable, Sendable {
    /// `GET`, `HEAD`, `PUT`, `PATCH`, `DELETE` (`GET` with `Accept: text/event-stream`: the event stream).
    case profile = "/users/profile/{id}"
    /// `GET`: the profile's event stream (Server-Sent Events).
    case profileEvents = "/users/profile/{id}/events"
    /// `GET`: everything the service keeps about a profile, for its owner or an administrator.
    case profileExport = "/users/profile/{id}/export"
    /// `GET`, `HEAD`: the profile that holds a handle, or a redirect from a handle it gave up.
    case profileByUsername = "/users/by-username/{username}"
    /// `GET`, `HEAD`: the profiles of a list (`?ids=3@7,1,2` or `?usernames=ada,bob`).
    case profiles = "/users/profiles"
    /// `GET`: one event stream for the profiles of a list (`?ids=3@7,1,2`, up to 1,000).
    case profilesEvents = "/users/profiles/events"
    /// The process answers.
    case health = "/healthz"
    /// PostgreSQL reachable and not draining (memcached and the change feed reported).
    case readiness = "/readyz"
    /// Prometheus text, when a renderer is configured.
    case metrics = "/metrics"

    static let profilePathPrefix = "/users/profile/"
    static let usernamePathPrefix = "/users/by-username/"
    static let eventsSuffix = "/events"
    static let exportSuffix = "/export"

    /// The methods the route answers; any other is 405 with ``allowHeader``.
    public var methods: [HTTPMethod] {
        switch self {
        case .profile: [.get, .head, .put, .patch, .delete]
        case .profileEvents, .profilesEvents, .profileExport: [.get]
        case .profiles, .profileByUsername: [.get, .head]
        case .health, .readiness, .metrics: [.get, .head]
        }
    }

    /// Whether the route answers `method`: ``methods`` without building the array, for the
    /// classification every request gets on its event loop.
    func answers(_ method: HTTPMethod) -> Bool {
        switch (self, method) {
        case (.profile, .get), (.profile, .head), (.profile, .put), (.profile, .patch), (.profile, .delete): true
        case (.profileEvents, .get), (.profilesEvents, .get), (.profileExport, .get): true
        case (.profiles, .get), (.profiles, .head), (.profileByUsername, .get), (.profileByUsername, .head): true
        case (.health, .get), (.health, .head), (.readiness, .get), (.readiness, .head): true
        case (.metrics, .get), (.metrics, .head): true
        default: false
        }
    }

    /// The `Allow` of the route's 405.
    var allowHeader: String { methods.map(\.rawValue).joined(separator: ", ") }

    /// The route a path belongs to; the id segment is checked by the route itself (400).
    init?(path: String) {
        if path.hasPrefix(Self.profilePathPrefix) {
            self = path.hasSuffix(Self.eventsSuffix) ? .profileEvents : path.hasSuffix(Self.exportSuffix) ? .profileExport : .profile
            return
        }
        if path.hasPrefix(Self.usernamePathPrefix) {
            self = .profileByUsername
            return
        }
        switch path {
        case "/users/profiles": self = .profiles
        case "/users/profiles/events": self = .profilesEvents
        case "/healthz": self = .health
        case "/readyz": self = .readiness
        case "/metrics": self = .metrics
        default: return nil
        }
    }
}
