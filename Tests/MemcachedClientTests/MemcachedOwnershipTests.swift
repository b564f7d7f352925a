import Foundation
import Logging
import MemcachedClient
import Testing

/// A connection belongs to the thread that used it first (no server needed: `server(forKey:)`
/// only hashes).
@Suite struct MemcachedOwnershipTests {
    @Test func theOwnerThreadMayKeepUsingIt() throws {
        let connection = try MemcachedConnection(
            configuration: MemcachedConfiguration(servers: "127.0.0.1:1"), logger: Logger(label: "test"))
        #expect(connection.server(forKey: "a") == MemcachedServer(host: "127.0.0.1", port: 1))
        #expect(connection.server(forKey: "b") == MemcachedServer(host: "127.0.0.1", port: 1))
        connection.close()
        connection.close()  // idempotent
    }

    @Test func aSecondThreadStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let connection = try MemcachedConnection(
                configuration: MemcachedConfiguration(servers: "127.0.0.1:1"), logger: Logger(label: "test"))
            _ = connection.server(forKey: "a")
            nonisolated(unsafe) let shared = connection
            let done = DispatchSemaphore(value: 0)
            let thread = Thread {
                _ = shared.server(forKey: "a")  // precondition: used from a second thread
                done.signal()
            }
            thread.start()
            done.wait()
            connection.close()  // not reached
        }
    }

    @Test func useAfterCloseStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let connection = try MemcachedConnection(
                configuration: MemcachedConfiguration(servers: "127.0.0.1:1"), logger: Logger(label: "test"))
            connection.close()
            _ = connection.get("a")
        }
    }
}
