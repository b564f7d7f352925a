/// One structured log line, built as bytes: logfmt or JSON, every value escaped (lines carry user
/// text such as request paths).
///
///     ts=2026-11-21T10:00:00.123Z level=info logger=profile-service msg=request method=GET status=200
///     {"ts":"2026-11-21T10:00:00.123Z","level":"info","logger":"profile-service","msg":"request","status":"200"}
///
/// A value is reused line after line (``begin(level:logger:message:)`` clears it), so a thread that
/// keeps one — a worker writing the access log — formats without allocating, and formats the
/// timestamp's date and time once a second. Hand it to ``LogSink/write(_:)-(LogLine)``.
public struct LogLine: Sendable {
    public enum Format: String, CaseIterable, Sendable {
        case logfmt, json
    }

    public let format: Format
    /// The line so far; complete (closing brace, newline) after ``end()``.
    public private(set) var bytes: [UInt8] = []
    private var cachedSecond = -1
    /// `2026-11-21T10:00:00.` for ``cachedSecond``.
    private var cachedTimestampPrefix: [UInt8] = []
    /// The encoded level, logger and message of the last line: the access log repeats them.
    private var cachedHead: (level: String, logger: String, message: String, bytes: [UInt8])?

    public init(format: Format) {
        self.format = format
        bytes.reserveCapacity(512)
    }

    /// Starts a new line with its timestamp, level, logger label and message.
    public mutating func begin(level: String, logger: String, message: String) {
        bytes.removeAll(keepingCapacity: true)
        if format == .json { bytes.append(UInt8(ascii: "{")) }
        appendKey("ts")
        appendTimestamp()
        if let head = cachedHead, head.level == level, head.logger == logger, head.message == message {
            bytes.append(contentsOf: head.bytes)
            return
        }
        let start = bytes.count
        append("level", level)
        append("logger", logger)
        append("msg", message)
        cachedHead = (level, logger, message, Array(bytes[start...]))
    }

    /// Adds `key=value` (escaped and quoted as needed).
    public mutating func append(_ key: String, _ value: String) {
        appendKey(key)
        var value = value
        value.withUTF8 { appendValue($0) }
    }

    /// Adds `key=value` for a substring (a request path) without copying it into a `String`.
    public mutating func append(_ key: String, _ value: Substring) {
        appendKey(key)
        var value = value
        value.withUTF8 { appendValue($0) }
    }

    /// Adds an integer value (a string in JSON, like every other value).
    public mutating func append(_ key: String, integer: Int) {
        appendKey(key)
        if format == .json { bytes.append(UInt8(ascii: "\"")) }
        appendDecimal(integer)
        if format == .json { bytes.append(UInt8(ascii: "\"")) }
    }

    /// Adds nanoseconds as milliseconds with three decimals, e.g. `duration_ms=0.210`.
    public mutating func append(_ key: String, milliseconds nanoseconds: Int64) {
        appendKey(key)
        let microseconds = Int(max(nanoseconds, 0) / 1000)
        if format == .json { bytes.append(UInt8(ascii: "\"")) }
        appendDecimal(microseconds / 1000)
        bytes.append(UInt8(ascii: "."))
        appendDecimal(microseconds % 1000, width: 3)
        if format == .json { bytes.append(UInt8(ascii: "\"")) }
    }

    /// Ends the line: the closing brace in JSON, and the newline.
    public mutating func end() {
        if format == .json { bytes.append(UInt8(ascii: "}")) }
        bytes.append(UInt8(ascii: "\n"))
    }

    // MARK: Encoding

    private mutating func appendKey(_ key: String) {
        var key = key
        switch format {
        case .logfmt:
            if bytes.last != nil { bytes.append(UInt8(ascii: " ")) }
            key.withUTF8 { bytes.append(contentsOf: $0) }
            bytes.append(UInt8(ascii: "="))
        case .json:
            if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
            key.withUTF8 { appendQuoted($0) }
            bytes.append(UInt8(ascii: ":"))
        }
    }

    private mutating func appendValue(_ value: UnsafeBufferPointer<UInt8>) {
        // logfmt leaves a plain value bare; one with a space, quote, '=', backslash, control or
        // non-ASCII byte is quoted like a JSON string (also valid logfmt).
        if format == .logfmt, !value.isEmpty, !value.contains(where: { $0 <= 0x20 || $0 >= 0x7F || $0 == 0x22 || $0 == 0x3D || $0 == 0x5C }) {
            bytes.append(contentsOf: value)
        } else {
            appendQuoted(value)
        }
    }

    /// A JSON string literal: `"` and `\` escaped, control characters (C0, DEL, C1) and the line
    /// separators U+2028/U+2029 as `\uXXXX`, other UTF-8 as it is.
    private mutating func appendQuoted(_ value: UnsafeBufferPointer<UInt8>) {
        bytes.append(UInt8(ascii: "\""))
        var index = 0
        while index < value.count {
            let byte = value[index]
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case UInt8(ascii: "\n"): bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20, 0x7F: appendUnicodeEscape(UInt32(byte))
            case 0xC2 where index + 1 < value.count && (0x80...0x9F).contains(value[index + 1]):
                appendUnicodeEscape(UInt32(value[index + 1]))  // U+0080…U+009F
                index += 1
            case 0xE2 where index + 2 < value.count && value[index + 1] == 0x80 && (value[index + 2] == 0xA8 || value[index + 2] == 0xA9):
                appendUnicodeEscape(0x2000 | UInt32(value[index + 2] - 0x80))  // U+2028, U+2029
                index += 2
            default: bytes.append(byte)
            }
            index += 1
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func appendUnicodeEscape(_ scalar: UInt32) {
        let digits: StaticString = "0123456789abcdef"
        bytes.append(contentsOf: [0x5C, UInt8(ascii: "u")])
        for shift in stride(from: 12, through: 0, by: -4) {
            bytes.append(digits.utf8Start[Int((scalar >> UInt32(shift)) & 0xF)])
        }
    }

    private mutating func appendDecimal(_ value: Int, width: Int = 1) {
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
            UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var magnitude = value.magnitude
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[19 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0 || count < width
            if value < 0 { bytes.append(UInt8(ascii: "-")) }
            bytes.append(contentsOf: buffer[(20 - count)...])
        }
    }

    /// RFC 3339 UTC with milliseconds, quoted in JSON.
    private mutating func appendTimestamp() {
        let (seconds, nanoseconds) = WallClock.now()
        if seconds != cachedSecond {
            cachedSecond = seconds
            let utc = WallClock.utc(seconds)
            var prefix = LogLine(format: .logfmt)
            prefix.bytes.removeAll()
            prefix.appendDecimal(utc.year, width: 4)
            for (separator, field) in zip(["-", "-", "T", ":", ":"], [utc.month, utc.day, utc.hour, utc.minute, utc.second]) {
                prefix.bytes.append(contentsOf: separator.utf8)
                prefix.appendDecimal(field, width: 2)
            }
            prefix.bytes.append(UInt8(ascii: "."))
            cachedTimestampPrefix = prefix.bytes
        }
        if format == .json { bytes.append(UInt8(ascii: "\"")) }
        bytes.append(contentsOf: cachedTimestampPrefix)
        appendDecimal(nanoseconds / 1_000_000, width: 3)
        bytes.append(UInt8(ascii: "Z"))
        if format == .json { bytes.append(UInt8(ascii: "\"")) }
    }
}
