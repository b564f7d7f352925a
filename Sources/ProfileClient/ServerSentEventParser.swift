/// One Server-Sent Event: its `event`, `id` and `data` fields.
public struct ServerSentEvent: Sendable, Hashable {
    public var event: String?
    public var id: String?
    public var data: String

    public init(event: String?, id: String?, data: String) {
        self.event = event
        self.id = id
        self.data = data
    }
}

/// Incremental parser of `text/event-stream` (the WHATWG HTML "event stream interpretation"):
/// lines end in LF, CR or CRLF; an empty line dispatches the event; `:` starts a comment.
struct ServerSentEventParser {
    private var line: [UInt8] = []
    private var lastWasCR = false
    private var event: String?
    private var id: String?
    private var data: [String] = []
    /// The last `retry:` value, in milliseconds.
    private(set) var retryMilliseconds: Int?

    /// Feeds bytes; returns the events they complete.
    mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if byte == 10, lastWasCR {
                lastWasCR = false
                continue
            }
            lastWasCR = byte == 13
            if byte == 10 || byte == 13 {
                if let event = endLine() { events.append(event) }
            } else {
                line.append(byte)
            }
        }
        return events
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        guard !line.isEmpty else {
            defer { (event, data) = (nil, []) }
            guard !data.isEmpty else { return nil }
            return ServerSentEvent(event: event, id: id, data: data.joined(separator: "\n"))
        }
        if line[0] == UInt8(ascii: ":") { return nil }
        let colon = line.firstIndex(of: UInt8(ascii: ":"))
        let name = String(decoding: line[..<(colon ?? line.endIndex)], as: UTF8.self)
        var value = colon.map { line[($0 + 1)...] } ?? []
        if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        let text = String(decoding: value, as: UTF8.self)
        switch name {
        case "event": event = text
        case "data": data.append(text)
        case "id": if !text.contains("\0") { id = text }
        case "retry": if let milliseconds = Int(text), milliseconds >= 0 { retryMilliseconds = milliseconds }
        default: break
        }
        return nil
    }
}
