import Foundation
import Logging
import MemcachedClient
import PostgresClient
import Synchronization
import TestSupport

/// Writers raising the versions of `ids` — through a service (`PUT`s with the version they last
/// saw) and in SQL behind its back (the cache learns of those only from the change feed) — and a
/// flusher emptying every memcached node every 5 ms, until ``stop()``. Keeps each id's last
/// acknowledged version: a 200's new version, or a 409's current one (committed too).
final class WriteLoad: Sendable {
    let acknowledged: Mutex<[Int64: Int]>
    let writes = Atomic<Int>(0)
    let sqlWrites = Atomic<Int>(0)
    private let flusher: MemcachedFlusher
    /// While set, the writers idle and the flusher goes on: quiet spells in which a late standby
    /// catches up with the primary (ReplicaEndToEndTests).
    let paused = Atomic<Bool>(false)
    private let running = Atomic<Bool>(true)
    private let threads: Mutex<[TestThread]> = Mutex([])

    init(ids: [Int64], servicePort: Int, serviceWriters: Int = 4, sqlWriters: Int = 2) {
        acknowledged = Mutex(Dictionary(uniqueKeysWithValues: ids.map { ($0, 1) }))
        flusher = MemcachedFlusher(every: .milliseconds(5))
        let started =
            (0..<serviceWriters).map { writer in TestThread { self.writeThroughService(ids, port: servicePort, writer: writer) } }
            + (0..<sqlWriters).map { writer in TestThread { self.writeInSQL(ids, writer: writer) } }
        threads.withLock { $0 = started }
    }

    var isRunning: Bool { running.load(ordering: .relaxed) }

    /// Flushes of every memcached node so far.
    var flushes: Int { flusher.flushes }

    /// Stops every writer and the flusher, and waits for them.
    func stop() {
        running.store(false, ordering: .relaxed)
        threads.withLock { $0 }.forEach { $0.join() }
        flusher.stop()
    }

    private func acknowledge(_ id: Int64, version: Int) {
        acknowledged.withLock { $0[id] = max($0[id] ?? 1, version) }
    }

    private func writeThroughService(_ ids: [Int64], port: Int, writer: Int) {
        var connection: HTTPTestClient?
        var round = 0
        while isRunning {
            if paused.load(ordering: .relaxed) {
                usleep(5_000)
                continue
            }
            // After a failed request, a new connection: the instance may have been killed and
            // started again on its port (ReplicaEndToEndTests' crash drill).
            guard let client = connection ?? (try? HTTPTestClient(port: port)) else {
                usleep(10_000)
                continue
            }
            connection = client
            let id = ids[(writer * 5 + round) % ids.count]
            round += 1
            let expected = acknowledged.withLock { $0[id] ?? 1 }
            let body = #"{"display_name":"w\#(round)","version":\#(expected)}"#
            let token = ServiceProcess.bearer(String(id))["Authorization"] ?? ""
            guard
                (try? client.send(
                    "PUT /users/profile/\(id) HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                        + "Authorization: \(token)\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")) != nil,
                let response = try? client.readResponse()
            else {
                connection = nil
                continue
            }
            guard let json = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] else { continue }
            let answered = response.status == 200 ? json : json["current"] as? [String: Any]
            guard let version = answered?["version"] as? Int else { continue }
            acknowledge(id, version: version)
            if response.status == 200 { writes.add(1, ordering: .relaxed) }
        }
    }

    private func writeInSQL(_ ids: [Int64], writer: Int) {
        var logger = Logger(label: "write-load-sql")
        logger.logLevel = .critical
        guard let configuration = try? PostgresConfiguration(url: TestEnvironment.databaseURL) else { return }
        let connection = PostgresConnection(configuration: configuration, statements: [], logger: logger)
        defer { connection.close() }
        var round = 0
        while isRunning {
            if paused.load(ordering: .relaxed) {
                usleep(5_000)
                continue
            }
            let id = ids[(writer * 7 + round * 3) % ids.count]
            round += 1
            guard
                let result = try? connection.simpleQuery(
                    "UPDATE user_profiles SET display_name = 'sql \(round)' WHERE id = \(id) RETURNING version"),
                let version: Int32 = try? result.rows.first?.decode("version")
            else { continue }
            acknowledge(id, version: Int(version))
            sqlWrites.add(1, ordering: .relaxed)
            usleep(2_000)
        }
    }
}
