import Synchronization

/// How often the request path parsed what a classified request carries: what a unit test counts
/// to show that it is parsed once. Off (nil) in production: shared counters would be written by
/// every loop and worker.
public final class ParseCounts: Sendable {
    enum Item {
        case path, floor, list, body, token
    }

    private let pathCount = Atomic<Int>(0)
    private let floorCount = Atomic<Int>(0)
    private let listCount = Atomic<Int>(0)
    private let bodyCount = Atomic<Int>(0)
    private let tokenCount = Atomic<Int>(0)

    public init() {}

    /// Profile ids parsed from a path (a profile's, or its event stream's).
    public var paths: Int { pathCount.load(ordering: .relaxed) }
    /// Floors (`min_version`, `If-None-Match` of a read; `Last-Event-ID` of a stream) parsed.
    public var floors: Int { floorCount.load(ordering: .relaxed) }
    /// Id lists (`ids=` of a list or a list's stream) parsed.
    public var lists: Int { listCount.load(ordering: .relaxed) }
    /// Write bodies parsed.
    public var bodies: Int { bodyCount.load(ordering: .relaxed) }
    /// Tokens verified.
    public var tokens: Int { tokenCount.load(ordering: .relaxed) }

    func count(_ item: Item) {
        switch item {
        case .path: pathCount.add(1, ordering: .relaxed)
        case .floor: floorCount.add(1, ordering: .relaxed)
        case .list: listCount.add(1, ordering: .relaxed)
        case .body: bodyCount.add(1, ordering: .relaxed)
        case .token: tokenCount.add(1, ordering: .relaxed)
        }
    }
}
