import ServiceRuntime
import Logging

/// One line per event, as logfmt or JSON (``LogLine``), handed to a ``LogSink`` — the process's
/// stderr — which writes it off the calling thread (docs/design.md §6).
///
///     ts=2026-11-21T10:00:00.123Z level=info logger=profile-service msg=listening address=127.0.0.1:8080
///
/// Metadata keys are sorted, so a line's fields come in a stable order.
struct StructuredLogHandler: LogHandler {
    typealias Format = LogLine.Format

    let label: String
    let format: Format
    let sink: LogSink
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    init(label: String, format: Format, sink: LogSink = .standardError) {
        self.label = label
        self.format = format
        self.sink = sink
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var line = LogLine(format: format)
        line.begin(level: event.level.rawValue, logger: label, message: event.message.description)
        let merged = event.metadata.map { metadata.merging($0) { $1 } } ?? metadata
        for key in merged.keys.sorted() { line.append(key, "\(merged[key]!)") }
        line.end()
        sink.write(line)
    }
}
