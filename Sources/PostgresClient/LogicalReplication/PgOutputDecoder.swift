/// Decodes `pgoutput` messages (protocol version 1), the payloads of
/// ``ReplicationMessage/walData(start:walEnd:serverTime:payload:)``.
///
/// Pure: bytes in, a ``PgOutputMessage`` out, no state. Message kinds it does not need (origin,
/// type, logical messages, later protocol versions' streaming messages) decode as
/// ``PgOutputMessage/other(kind:)``; bytes after a message's known fields are ignored, as a newer
/// server may append some.
///
/// ```swift
/// if case .walData(_, _, _, let payload) = message {
///     switch try PgOutputDecoder.decode(payload) { ... }
/// }
/// ```
///
/// The formats are those of PostgreSQL 15's `src/backend/replication/logical/proto.c`.
/// Related PostgreSQL documentation:
/// <https://www.postgresql.org/docs/15/protocol-logicalrep-message-formats.html>
public enum PgOutputDecoder {
    /// Decodes one message.
    ///
    /// - Throws: ``PgOutputDecodingError`` for a truncated message, an unknown tuple kind or a
    ///   negative length. It never traps on any input.
    public static func decode(_ payload: [UInt8]) throws -> PgOutputMessage {
        var reader = WireReader(payload)
        let kind = try reader.uint8()
        switch kind {
        case UInt8(ascii: "B"):
            // Int64 final LSN, Int64 commit timestamp, Int32 xid.
            return .begin(finalLSN: try reader.lsn(), commitTime: try reader.int64(), xid: try reader.uint32())
        case UInt8(ascii: "C"):
            // Int8 flags (unused, 0), Int64 commit LSN, Int64 end LSN, Int64 commit timestamp.
            _ = try reader.uint8()
            return .commit(commitLSN: try reader.lsn(), endLSN: try reader.lsn(), commitTime: try reader.int64())
        case UInt8(ascii: "R"):
            return .relation(try relation(&reader))
        case UInt8(ascii: "I"):
            let relationID = try reader.uint32()
            try expectMarker(&reader, in: [UInt8(ascii: "N")])
            return .insert(relationID: relationID, new: try tuple(&reader))
        case UInt8(ascii: "U"):
            // An optional old key ('K') or old row ('O'), then the new row ('N').
            let relationID = try reader.uint32()
            var old: [PgOutputValue]? = nil
            let marker = try expectMarker(&reader, in: [UInt8(ascii: "K"), UInt8(ascii: "O"), UInt8(ascii: "N")])
            if marker != UInt8(ascii: "N") {
                old = try tuple(&reader)
                try expectMarker(&reader, in: [UInt8(ascii: "N")])
            }
            return .update(relationID: relationID, old: old, new: try tuple(&reader))
        case UInt8(ascii: "D"):
            let relationID = try reader.uint32()
            try expectMarker(&reader, in: [UInt8(ascii: "K"), UInt8(ascii: "O")])
            return .delete(relationID: relationID, old: try tuple(&reader))
        case UInt8(ascii: "T"):
            // Int32 relation count, Int8 options (CASCADE, RESTART IDENTITY), Int32 ids.
            let start = reader.offset
            let count = Int(try reader.int32())
            guard count >= 0 else { throw reader.error(.invalidLength(count), at: start) }
            _ = try reader.uint8()
            var ids: [UInt32] = []
            for _ in 0..<count { ids.append(try reader.uint32()) }
            return .truncate(relationIDs: ids)
        default:
            return .other(kind: kind)
        }
    }

    /// Int32 id, String namespace, String name, Int8 replica identity setting, Int16 column
    /// count, then per column: Int8 flags (1 = part of the key), String name, Int32 type OID,
    /// Int32 type modifier.
    private static func relation(_ reader: inout WireReader) throws -> PgOutputRelation {
        let id = try reader.uint32()
        let namespace = try reader.cString()
        let name = try reader.cString()
        _ = try reader.uint8()
        let count = try columnCount(&reader)
        var columns: [PgOutputRelation.Column] = []
        for _ in 0..<count {
            let flags = try reader.uint8()
            let columnName = try reader.cString()
            let typeOID = try reader.uint32()
            _ = try reader.int32()
            columns.append(.init(name: columnName, typeOID: typeOID, isKey: flags & 1 != 0))
        }
        return PgOutputRelation(id: id, namespace: namespace, name: name, columns: columns)
    }

    /// TupleData: Int16 column count, then per column 'n' (null), 'u' (unchanged TOAST) or
    /// 't' with an Int32 length and that many bytes of text.
    private static func tuple(_ reader: inout WireReader) throws -> [PgOutputValue] {
        let count = try columnCount(&reader)
        var values: [PgOutputValue] = []
        for _ in 0..<count {
            let position = reader.offset
            switch try reader.uint8() {
            case UInt8(ascii: "n"):
                values.append(.null)
            case UInt8(ascii: "u"):
                values.append(.unchangedToast)
            case UInt8(ascii: "t"):
                let lengthPosition = reader.offset
                let length = Int(try reader.int32())
                guard length >= 0 else { throw reader.error(.invalidLength(length), at: lengthPosition) }
                values.append(.text(try reader.text(count: length)))
            case let other:
                throw reader.error(.unknownTupleKind(other), at: position)
            }
        }
        return values
    }

    private static func columnCount(_ reader: inout WireReader) throws -> Int {
        let position = reader.offset
        let count = Int(Int16(bitPattern: try reader.uint16()))
        guard count >= 0 else { throw reader.error(.invalidLength(count), at: position) }
        return count
    }

    @discardableResult
    private static func expectMarker(_ reader: inout WireReader, in markers: [UInt8]) throws -> UInt8 {
        let position = reader.offset
        let marker = try reader.uint8()
        guard markers.contains(marker) else { throw reader.error(.unexpectedTupleMarker(marker), at: position) }
        return marker
    }
}
