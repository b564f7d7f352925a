/// A `pgoutput` message that ``PgOutputDecoder`` cannot read.
///
/// Like ``PostgresError``, its description shows where decoding stopped, never the bytes: rows
/// hold personal data.
public struct PgOutputDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Reason: Sendable, Hashable {
        /// The payload ended before the message did (an empty payload included).
        case truncated
        /// A row's column is not 'n' (null), 'u' (unchanged TOAST) or 't' (text). 'b' (binary)
        /// only comes when a client asks for `binary 'true'`, which this client never does.
        case unknownTupleKind(UInt8)
        /// An insert, update or delete without the 'N', 'K' or 'O' marker where one must be.
        case unexpectedTupleMarker(UInt8)
        /// A negative column count or value length.
        case invalidLength(Int)
    }

    public let reason: Reason
    /// The message's first byte ('I' for an insert …), `nil` for an empty payload.
    public let messageKind: UInt8?
    /// Where in the payload decoding stopped.
    public let offset: Int

    public init(reason: Reason, messageKind: UInt8?, offset: Int) {
        self.reason = reason
        self.messageKind = messageKind
        self.offset = offset
    }

    public var description: String {
        let kind = messageKind.map { "'\(Character(Unicode.Scalar($0)))'" } ?? "empty"
        return "PgOutputDecodingError.\(reason) in a \(kind) message at offset \(offset)"
    }
}
