// The wrapper side of scripts/bench-clients-pg.sh: one PostgresConnection, the same prepared
// point select and single-row update as raw.c. Compiled with the PostgresClient sources.
import Logging

#if canImport(Glibc)
import Glibc
#endif

let arguments = CommandLine.arguments
let url = arguments[1]
let selects = Int(arguments[2])!
let updates = Int(arguments[3])!

let selectProfile = PostgresStatement(
    name: "select_profile", sql: "SELECT id, username, display_name, version FROM bench_profiles WHERE id = $1",
    isIdempotent: true)
let updateProfile = PostgresStatement(
    name: "update_profile", sql: "UPDATE bench_profiles SET display_name = $2, version = version + 1 WHERE id = $1",
    isIdempotent: false)

var logger = Logger(label: "bench")
logger.logLevel = .error
let connection = PostgresConnection(
    configuration: try PostgresConfiguration(url: url), statements: [selectProfile, updateProfile], logger: logger)
try connection.connect()

func report(_ name: String, _ latencies: inout [Duration], total: Duration) {
    latencies.sort()
    func us(_ d: Duration) -> Double {
        Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12
    }
    let rate = Double(latencies.count) / (us(total) / 1e6)
    let line = "\(name + String(repeating: " ", count: max(0, 28 - name.count))) \(String(repeating: " ", count: max(0, 9 - String(Int(rate)).count)))\(Int(rate)) ops/s  "
        + "p50 \((us(latencies[latencies.count / 2]) * 10).rounded() / 10) us  "
        + "p99 \((us(latencies[Int(Double(latencies.count) * 0.99)]) * 10).rounded() / 10) us"
    print(line)
}

let clock = ContinuousClock()
var checksum = 0
for phase in 0..<2 {  // phase 0 warms up
    let n = phase == 1 ? selects : selects / 10
    var latencies: [Duration] = []
    latencies.reserveCapacity(n)
    let start = clock.now
    for i in 0..<n {
        let t = clock.now
        let row = try connection.execute(selectProfile, [1 + i % 1000]).rows[0]
        checksum += try row.decode("id", as: Int.self) + (try row.decode("username", as: String.self)).utf8.count
        _ = try row.decode("display_name", as: String.self)
        checksum += try row.decode("version", as: Int.self)
        latencies.append(clock.now - t)
    }
    if phase == 1 { report("Swift select (prepared)", &latencies, total: clock.now - start) }
}
for phase in 0..<2 {
    let n = phase == 1 ? updates : updates / 10
    var latencies: [Duration] = []
    latencies.reserveCapacity(n)
    let start = clock.now
    for i in 0..<n {
        let t = clock.now
        checksum += try connection.execute(updateProfile, [1 + i % 1000, "Name \(i)"]).affectedRows
        latencies.append(clock.now - t)
    }
    if phase == 1 { report("Swift update (1 row)", &latencies, total: clock.now - start) }
}
_ = "checksum \(checksum)\n".withCString { write(2, $0, strlen($0)) }  // keeps the work observable
connection.close()
