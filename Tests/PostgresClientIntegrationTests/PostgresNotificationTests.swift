import PostgresClient
import TestSupport
import Testing

extension PostgresServerTests {
    /// `LISTEN`, `NOTIFY` and their delivery through `waitForNotifications`, on the real server.
    @Suite struct PostgresNotificationTests {
        /// Waits for `count` notifications on `listener`, with a deadline.
        static func collect(_ count: Int, on listener: PostgresConnection, within limit: Duration = .seconds(5)) throws
            -> [PostgresNotification]
        {
            var received: [PostgresNotification] = []
            let deadline = ContinuousClock.now + limit
            while received.count < count, ContinuousClock.now < deadline {
                received += try listener.waitForNotifications(timeout: .milliseconds(100))
            }
            return received
        }

        @Test func deliversNotificationsInOrderWithPayloadAndSender() throws {
            let listener = try PostgresServerTests.connection()
            let sender = try PostgresServerTests.connection()
            defer { listener.close(); sender.close() }
            try listener.listen(on: "tests_channel")
            let senderPID = try PostgresServerTests.backendPID(sender)
            try sender.simpleQuery("NOTIFY tests_channel, '42:7'")
            try sender.simpleQuery("SELECT pg_notify('tests_channel', '43:1,44:0')")
            try sender.simpleQuery("NOTIFY other_channel, 'not for us'")

            let received = try Self.collect(2, on: listener)
            #expect(received.map(\.payload) == ["42:7", "43:1,44:0"])
            #expect(received.allSatisfy { $0.channel == "tests_channel" })
            #expect(received.first.map { Int($0.processID) } == senderPID)
        }

        @Test func returnsNothingWhenNoneArrivesInTime() throws {
            let listener = try PostgresServerTests.connection()
            defer { listener.close() }
            try listener.listen(on: "tests_quiet")
            let (received, elapsed) = try PostgresServerTests.elapsed {
                try listener.waitForNotifications(timeout: .milliseconds(200))
            }
            #expect(received.isEmpty)
            #expect(elapsed >= .milliseconds(150))
        }

        @Test func notificationsReceivedDuringAQueryAreNotLost() throws {
            let listener = try PostgresServerTests.connection()
            let sender = try PostgresServerTests.connection()
            defer { listener.close(); sender.close() }
            try listener.listen(on: "tests_buffered")
            try sender.simpleQuery("NOTIFY tests_buffered, 'one'")
            // The notification arrives while the listener runs a statement: libpq keeps it.
            try listener.simpleQuery("SELECT pg_sleep(0.2)")
            let received = try listener.waitForNotifications(timeout: .zero)
            #expect(received.map(\.payload) == ["one"])
        }

        @Test func aQuotedChannelNameIsOneIdentifier() throws {
            let listener = try PostgresServerTests.connection()
            let sender = try PostgresServerTests.connection()
            defer { listener.close(); sender.close() }
            try listener.listen(on: #"Mixed "Case"; DROP"#)
            try sender.simpleQuery(#"SELECT pg_notify('Mixed "Case"; DROP', 'ok')"#)
            #expect(try Self.collect(1, on: listener).map(\.payload) == ["ok"])
        }

        @Test func aLostSessionThrowsAndListensAgainAfterReconnecting() throws {
            let listener = try PostgresServerTests.connection()
            let sender = try PostgresServerTests.connection()
            defer { listener.close(); sender.close() }
            try listener.listen(on: "tests_lost")
            let pid = try PostgresServerTests.backendPID(listener)
            try sender.simpleQuery("SELECT pg_terminate_backend(\(pid))")

            var lost: PostgresError?
            let deadline = ContinuousClock.now + .seconds(5)
            while lost == nil, ContinuousClock.now < deadline {
                do {
                    _ = try listener.waitForNotifications(timeout: .milliseconds(100))
                } catch let error as PostgresError {
                    lost = error
                }
            }
            #expect(lost?.kind == .connectionUnavailable)
            // A new session (after the backoff) has to LISTEN again, and then hears notifications.
            var listening = false
            while !listening, ContinuousClock.now < deadline {
                listening = (try? listener.listen(on: "tests_lost")) != nil
                if !listening { PostgresServerTests.sleep(.milliseconds(50)) }
            }
            #expect(listening)
            try sender.simpleQuery("NOTIFY tests_lost, 'again'")
            #expect(try Self.collect(1, on: listener).map(\.payload) == ["again"])
        }
    }
}
