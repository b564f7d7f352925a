internal import CLibPQ
import ServiceRuntime

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One asynchronous notification (`NOTIFY channel, 'payload'` or `pg_notify(channel, payload)`),
/// copied out of libpq's `PGnotify`.
public struct PostgresNotification: Sendable, Equatable {
    /// The channel it was sent on.
    public var channel: String
    /// The payload ("" when none was given).
    public var payload: String
    /// The process id of the server backend that sent it.
    public var processID: Int32

    public init(channel: String, payload: String, processID: Int32) {
        self.channel = channel
        self.payload = payload
        self.processID = processID
    }
}

/// `LISTEN` and the delivery of notifications.
///
/// libpq: "A client application must … execute a LISTEN command … and then check for notification
/// messages with PQnotifies … PQconsumeInput … can be used to avoid blocking while waiting for
/// input from the backend server … A typical application using these functions will have a main
/// loop that uses select() or poll() to wait for all the conditions that it must respond to."
/// Notifications are at-most-once: those sent while no session listens are lost, so a listener
/// re-reads whatever it follows after every reconnect.
///
/// ```swift
/// try connection.listen(on: "profile_changes")
/// while running {
///     for notification in try connection.waitForNotifications(timeout: .milliseconds(500)) { … }
/// }
/// ```
///
/// Related libpq documentation: <https://www.postgresql.org/docs/15/libpq-notify.html>
extension PostgresConnection {
    /// Subscribes this session to `channel` (`LISTEN "channel"`, the identifier quoted).
    ///
    /// The subscription lasts as long as the session: after a reconnect, call it again.
    /// - Throws: ``PostgresError``.
    public func listen(on channel: String) throws {
        try simpleQuery("LISTEN " + LogicalReplicationStream.quoteIdentifier(channel))
    }

    /// Waits up to `timeout` for notifications and returns those that arrived, oldest first;
    /// empty when none came in time. Returns at once with any already received (for instance
    /// during an earlier statement).
    ///
    /// - Throws: ``PostgresError`` of kind ``PostgresError/Kind/connectionUnavailable`` when the
    ///   session is lost (the next call reconnects; `LISTEN` again then).
    public func waitForNotifications(timeout: Duration) throws -> [PostgresNotification] {
        ownerThread.check()
        let pgConnection = try connection()
        var notifications = drainNotifications(pgConnection)
        guard notifications.isEmpty else { return notifications }
        let socket = PQsocket(pgConnection)
        guard socket >= 0 else {
            dropConnection()
            throw PostgresError(kind: .connectionUnavailable, message: "the connection has no socket")
        }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, max(Int32(clamping: timeout.milliseconds), 0))
        if ready < 0 && errno != EINTR {
            throw PostgresError(kind: .other, message: "poll failed: errno \(errno)")
        }
        guard ready > 0 else { return [] }
        // "PQconsumeInput normally returns 1 indicating 'no error', but returns 0 if there was some
        // kind of trouble (in which case PQerrorMessage can be consulted)."
        if PQconsumeInput(pgConnection) == 0 || PQstatus(pgConnection) == CONNECTION_BAD {
            let message = errorMessage(of: pgConnection)
            dropConnection()
            throw PostgresError(kind: .connectionUnavailable, message: message)
        }
        notifications = drainNotifications(pgConnection)
        return notifications
    }

    /// Copies out and frees every notification libpq has parsed.
    private func drainNotifications(_ pgConnection: OpaquePointer) -> [PostgresNotification] {
        var notifications: [PostgresNotification] = []
        while let notify = PQnotifies(pgConnection) {
            // The strings live in the PGnotify block, freed with it: copy before PQfreemem.
            let value = notify.pointee
            notifications.append(
                PostgresNotification(
                    channel: value.relname.map { String(cString: $0) } ?? "",
                    payload: value.extra.map { String(cString: $0) } ?? "", processID: value.be_pid))
            PQfreemem(notify)
        }
        return notifications
    }

}
