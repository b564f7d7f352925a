/// One message the server sends in the replication stream's COPY BOTH sub-protocol.
///
/// Times are the server's clock, in microseconds since 2000-01-01 00:00:00 UTC
/// (see `Date(postgresEpochMicroseconds:)` and `Int64.postgresNow`).
///
/// Related PostgreSQL documentation:
/// <https://www.postgresql.org/docs/15/protocol-replication.html> ("XLogData", "Primary keepalive message")
public enum ReplicationMessage: Sendable, Equatable {
    /// 'w': WAL data; `payload` is one pgoutput message (decode it with ``PgOutputDecoder``).
    case walData(start: LSN, walEnd: LSN, serverTime: Int64, payload: [UInt8])
    /// 'k': primary keepalive. `walEnd` is where the server has sent up to; when
    /// `replyRequested`, answer at once with ``LogicalReplicationStream/sendStatus(flushed:replyRequested:)``
    /// or the server ends the stream after `wal_sender_timeout` (and waits that long to shut down).
    case keepalive(walEnd: LSN, serverTime: Int64, replyRequested: Bool)
}

extension ReplicationMessage {
    /// Parses one CopyData message; `nil` for an unknown kind or a short message.
    ///
    /// 'w': Int64 start, Int64 end of WAL on the server, Int64 send time, then the payload.
    /// 'k': Int64 end of WAL, Int64 send time, Byte1 reply requested.
    init?(copyData bytes: [UInt8]) {
        var reader = WireReader(bytes)
        do {
            switch try reader.uint8() {
            case UInt8(ascii: "w"):
                let start = try reader.lsn()
                let walEnd = try reader.lsn()
                let serverTime = try reader.int64()
                self = .walData(start: start, walEnd: walEnd, serverTime: serverTime, payload: reader.remainingBytes())
            case UInt8(ascii: "k"):
                let walEnd = try reader.lsn()
                let serverTime = try reader.int64()
                self = .keepalive(walEnd: walEnd, serverTime: serverTime, replyRequested: try reader.uint8() != 0)
            default:
                return nil
            }
        } catch {
            return nil
        }
    }

    /// A standby status update ('r'): Int64 written, flushed and applied positions, Int64 client
    /// clock, Byte1 reply requested.
    static func standbyStatusUpdate(
        written: LSN, flushed: LSN, applied: LSN, clock: Int64, replyRequested: Bool
    ) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(ascii: "r")]
        bytes.reserveCapacity(34)
        for value in [written.rawValue, flushed.rawValue, applied.rawValue, UInt64(bitPattern: clock)] {
            for shift in stride(from: 56, through: 0, by: -8) {
                bytes.append(UInt8(truncatingIfNeeded: value >> shift))
            }
        }
        bytes.append(replyRequested ? 1 : 0)
        return bytes
    }
}
