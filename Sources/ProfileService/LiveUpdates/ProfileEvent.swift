/// The Server-Sent Events wire format of the profile stream (docs/design.md §4).
///
/// ```
/// event: profile
/// id: 7
/// data: {"id":42,"username":"countess","display_name":"Ada","version":7,"updated_at":"…"}
///
/// ```
/// `data` is the profile JSON exactly as `GET` returns it; it never contains a line break (the
/// JSON writer escapes control characters), so one `data:` line carries it.
enum ProfileEvent {
    /// One `profile` event for the version `version` with the given JSON.
    static func bytes(version: Int32, json: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(json.count + 40)
        bytes.append(contentsOf: "event: profile\nid: ".utf8)
        bytes.append(contentsOf: String(version).utf8)
        bytes.append(contentsOf: "\ndata: ".utf8)
        bytes.append(contentsOf: json)
        bytes.append(contentsOf: "\n\n".utf8)
        return bytes
    }

    /// The `deleted` event: profile `id` does not exist (any more); `version` is the last one it
    /// had (0: none the service knows of). A profile's own stream ends after it; a list's stream
    /// goes on, and if the id is created again, its `profile` events follow.
    ///
    /// ```
    /// event: deleted
    /// data: {"id":42,"version":7}
    ///
    /// ```
    static func deleted(id: Int64, version: Int32) -> [UInt8] {
        Array("event: deleted\ndata: {\"id\":\(id),\"version\":\(version)}\n\n".utf8)
    }

    /// The reconnection delay hint a stream starts with.
    static func retryHint(milliseconds: Int) -> [UInt8] {
        Array("retry: \(milliseconds)\n\n".utf8)
    }
}
