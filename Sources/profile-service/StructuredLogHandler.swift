import Glibc
import Logging

/// One line per event on stderr, as logfmt or JSON, with every value escaped (log lines carry
/// user text such as request paths).
///
///     ts=2026-11-21T10:00:00.123Z level=info logger=profile-service msg=request method=GET status=200
///     {"ts":"2026-11-21T10:00:00.123Z","level":"info","logger":"profile-service","msg":"request","status":"200"}
///
/// Each line goes out in one `write(2)`, so lines from different threads never interleave and
/// no lock is taken (swift-log's `StreamLogHandler` serializes every line through one).
struct StructuredLogHandler: LogHandler {
    enum Format: String, CaseIterable {
        case logfmt, json
    }

    let label: String
    let format: Format
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    init(label: String, format: Format) {
        self.label = label
        self.format = format
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var fields: [(String, String)] = [
            ("ts", Self.timestamp()), ("level", event.level.rawValue), ("logger", label),
            ("msg", event.message.description),
        ]
        let merged = event.metadata.map { metadata.merging($0) { $1 } } ?? metadata
        for key in merged.keys.sorted() { fields.append((key, "\(merged[key]!)")) }
        var line = format == .json ? Self.json(fields) : Self.logfmt(fields)
        line.append("\n")
        line.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
    }

    private static func logfmt(_ fields: [(String, String)]) -> String {
        fields.map { key, value in
            let needsQuotes = value.isEmpty || value.utf8.contains { $0 <= 0x20 || $0 == 0x22 || $0 == 0x3D || $0 == 0x5C }
            return "\(key)=" + (needsQuotes ? quoted(value) : value)
        }.joined(separator: " ")
    }

    private static func json(_ fields: [(String, String)]) -> String {
        "{" + fields.map { "\(quoted($0.0)):\(quoted($0.1))" }.joined(separator: ",") + "}"
    }

    /// A JSON string literal; also valid logfmt quoting.
    private static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value)
                || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// RFC 3339 UTC with milliseconds.
    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var parts = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))."
            + "\(pad(Int32(now.tv_nsec / 1_000_000), 3))Z"
    }
}
