import HTTP1
public import ServiceRuntime

/// The access log: one `info` line per request (method, path, status, bytes, duration, request
/// id, cache outcome), in the format of every other line.
///
/// It bypasses swift-log's `Logger`: building a metadata dictionary of seven strings and sorting
/// it cost more than the rest of a cache hit's logging. Each worker formats into its own reusable
/// ``LogLine`` (no allocation) and hands the bytes to the ``LogSink`` (docs/design.md §6).
public struct AccessLog: Sendable {
    public let sink: LogSink
    public let format: LogLine.Format
    /// The `logger` field, as on the lines of the service's `Logger`.
    public let label: String

    public init(sink: LogSink = .standardError, format: LogLine.Format, label: String = "profile-service") {
        self.sink = sink
        self.format = format
        self.label = label
    }

    /// Formats the line into `line` (created on first use, then reused) and hands it to the sink.
    func record(
        _ request: HTTPRequest, _ response: HTTPResponse, requestID: String, duration: Duration,
        into line: inout LogLine?
    ) {
        if line == nil { line = LogLine(format: format) }
        line!.begin(level: "info", logger: label, message: "request")
        // Fields in key order, as the swift-log handler sorts metadata.
        line!.append("bytes", integer: request.method == .head ? 0 : response.body.count)
        line!.append("cache", response.headers["X-Cache"] ?? "none")
        line!.append("duration_ms", milliseconds: duration.totalNanoseconds)
        line!.append("method", request.method.rawValue)
        line!.append("path", request.path.prefix(256))
        line!.append("request_id", requestID)
        line!.append("status", integer: response.status.code)
        line!.end()
        sink.write(line!)
    }
}
