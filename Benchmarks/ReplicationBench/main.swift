// The program of scripts/bench-replication.sh: how fast committed rows come out of a
// LogicalReplicationStream, and how long from COMMIT to their arrival. Compiled with the
// PostgresClient sources (the module's internals are visible; only public API is used).
//
//   ReplicationBench <url> <paced commits> <burst transactions> <rows per burst transaction>
import Foundation
import Logging

let arguments = CommandLine.arguments
let url = arguments[1]
let pacedCommits = Int(arguments[2])!
let burstTransactions = Int(arguments[3])!
let rowsPerTransaction = Int(arguments[4])!

let logger = {
    var logger = Logger(label: "bench")
    logger.logLevel = .error
    return logger
}()
let configuration = try PostgresConfiguration(url: url)
let table = "bench_feed"
let publication = "bench_feed_pub"
let slot = "bench_feed_slot"

let setup = PostgresConnection(configuration: configuration, statements: [], logger: logger)
_ = try? LogicalReplicationSetup.dropSlot(named: slot, on: setup)
try setup.simpleQuery("DROP PUBLICATION IF EXISTS \(publication); DROP TABLE IF EXISTS \(table)")
try setup.simpleQuery("CREATE TABLE \(table) (id BIGINT PRIMARY KEY, display_name TEXT NOT NULL, version INT NOT NULL)")
_ = try LogicalReplicationSetup.ensurePublication(named: publication, tables: [table], on: setup)
_ = try LogicalReplicationSetup.ensureSlot(named: slot, on: setup)
defer {
    _ = try? LogicalReplicationSetup.dropSlot(named: slot, on: setup)
    _ = try? setup.simpleQuery("DROP PUBLICATION IF EXISTS \(publication); DROP TABLE IF EXISTS \(table)")
    setup.close()
}

/// Commits on a thread of its own (a PostgresConnection stays on its thread).
func write(_ body: @escaping @Sendable (PostgresConnection) throws -> Void) {
    let (configuration, logger) = (configuration, logger)
    Thread.detachNewThread {
        let connection = PostgresConnection(configuration: configuration, statements: [], logger: logger)
        defer { connection.close() }
        do { try body(connection) } catch { fatalError("writer: \(error)") }
    }
}

/// Reads until `transactions` commits arrived; returns each commit's latency (arrival minus the
/// server's commit time, in µs), the rows seen, the payloads and the elapsed time from the first message.
func read(
    _ stream: LogicalReplicationStream, transactions: Int
) throws -> (
    latencies: [Int64], rows: Int, payloads: [[UInt8]], elapsed: Duration
) {
    var latencies: [Int64] = []
    var rows = 0
    var payloads: [[UInt8]] = []
    var start: ContinuousClock.Instant?
    while latencies.count < transactions {
        guard let message = try stream.next(timeout: .seconds(30)) else { fatalError("stream stalled") }
        guard case .walData(_, _, _, let payload) = message else { continue }
        if start == nil { start = .now }
        payloads.append(payload)
        switch try PgOutputDecoder.decode(payload) {
        case .insert, .update: rows += 1
        case .commit(_, let endLSN, let commitTime):
            latencies.append(Int64.postgresNow - commitTime)
            try stream.sendStatus(flushed: endLSN)
        default: break
        }
    }
    return (latencies, rows, payloads, .now - start!)
}

func milliseconds(_ microseconds: Int64) -> String { String(format: "%.2f ms", Double(microseconds) / 1000) }
func percentile(_ sorted: [Int64], _ p: Double) -> Int64 {
    sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}
func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

let stream = try LogicalReplicationStream(
    configuration: configuration, slot: slot, publication: publication, logger: logger)
defer { stream.close() }

// 1. Paced single-row updates, one commit every 2 ms: COMMIT-to-arrival latency.
try setup.simpleQuery("INSERT INTO \(table) SELECT i, 'user ' || i, 1 FROM generate_series(1, 1000) AS i")
_ = try read(stream, transactions: 1)
write { connection in
    for i in 0..<pacedCommits {
        try connection.simpleQuery(
            "UPDATE \(table) SET display_name = 'paced \(i)', version = version + 1 WHERE id = \(1 + i % 1000)")
        usleep(2000)
    }
}
let paced = try read(stream, transactions: pacedCommits)
let pacedSorted = paced.latencies.sorted()
print(
    "paced: \(pacedCommits) single-row UPDATE commits, one per 2 ms: COMMIT→arrival p50 \(milliseconds(percentile(pacedSorted, 0.5))) "
        + "p99 \(milliseconds(percentile(pacedSorted, 0.99))) max \(milliseconds(pacedSorted.last!))")

// 2. A backlog (a consumer that was away): commits of several rows written first, then read.
let writeStart = ContinuousClock.now
for t in 0..<burstTransactions {
    try setup.simpleQuery(
        "UPDATE \(table) SET display_name = 'backlog \(t)', version = version + 1 WHERE id <= \(rowsPerTransaction)")
}
let writeElapsed = ContinuousClock.now - writeStart
let backlog = try read(stream, transactions: burstTransactions)
print(
    "backlog: \(burstTransactions) commits of \(rowsPerTransaction) rows (written at \(Int(Double(burstTransactions) / seconds(writeElapsed))) commits/s) "
        + "read back at \(Int(Double(backlog.rows) / seconds(backlog.elapsed))) rows/s, "
        + "\(Int(Double(burstTransactions) / seconds(backlog.elapsed))) commits/s")

// 3. The decoder alone, on the backlog's payloads.
let decodeStart = ContinuousClock.now
var updates = 0
for _ in 0..<5 {
    for payload in backlog.payloads { if case .update = try PgOutputDecoder.decode(payload) { updates += 1 } }
}
let decodeElapsed = ContinuousClock.now - decodeStart
let decodeRate = Int(Double(backlog.payloads.count * 5) / seconds(decodeElapsed))
print("decoder: \(decodeRate) pgoutput messages/s on one core (\(updates) updates)")
