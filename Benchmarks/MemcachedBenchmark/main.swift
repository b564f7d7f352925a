// Prints get/set figures on one connection to one memcached node: through MemcachedConnection,
// and through the same libmemcached C calls made directly (the wrapper's floor).
//
//   swift run -c release MemcachedBenchmark [host:port] [operations] [value bytes]
//
// Not a test: it asserts nothing. scripts/bench-clients-mc.sh builds it and runs it.

import CLibMemcached
import Glibc
import Logging
import MemcachedClient

let arguments = CommandLine.arguments
let server = arguments.count > 1 ? arguments[1] : "127.0.0.1:21211"
let operations = arguments.count > 2 ? Int(arguments[2])! : 20_000
let valueSize = arguments.count > 3 ? Int(arguments[3])! : 256
let rounds = arguments.count > 4 ? Int(arguments[4])! : 10

let configuration = try MemcachedConfiguration(servers: server)
let wrapper = try MemcachedConnection(configuration: configuration, logger: Logger(label: "bench"))
// The raw handle gets the very same configuration string and failure limit.
guard let raw = configuration.configurationString.withCString({ memcached($0, strlen($0)) }) else {
    fatalError("memcached() failed")
}
memcached_behavior_set(raw, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, UInt64(configuration.serverFailureLimit))
let rawResult = UnsafeMutablePointer<memcached_result_st>.allocate(capacity: 1)
memcached_result_create(raw, rawResult)

let value = (0..<valueSize).map { UInt8(truncatingIfNeeded: $0) }
let keys = (0..<1000).map { "bench:key:\($0)" }
for key in keys { precondition(wrapper.set(key, value: value) == .stored) }

@inline(__always) func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

struct Sample {
    var latencies: [UInt64] = []
    var elapsed: UInt64 = 0
    var count = 0
    /// The fastest round: the least disturbed by other work on the machine.
    var bestRound = UInt64.max
}

var samples: [String: Sample] = [:]
var sink = 0

/// Runs `body` `operations` times, timing each call.
@MainActor func measure(_ name: String, _ body: @MainActor (String) -> Int) {
    var sample = samples[name] ?? Sample()
    sample.latencies.reserveCapacity(operations * rounds)
    let start = now()
    for index in 0..<operations {
        let key = keys[index % keys.count]
        let before = now()
        sink &+= body(key)
        sample.latencies.append(now() - before)
    }
    let elapsed = now() - start
    sample.elapsed += elapsed
    sample.bestRound = min(sample.bestRound, elapsed)
    sample.count += operations
    samples[name] = sample
}

// The C calls the wrapper makes, minus the wrapper: mget of one key + fetch_result until NULL,
// copying the value out (the wrapper returns it as [UInt8]).
@MainActor func rawGet(_ key: String) -> Int {
    var key = key
    return key.withUTF8 { bytes in
        bytes.withMemoryRebound(to: CChar.self) { chars in
            var pointer: UnsafePointer<CChar>? = chars.baseAddress
            var length = chars.count
            guard memcached_mget(raw, &pointer, &length, 1) == MEMCACHED_SUCCESS else { fatalError("mget") }
            var rc = MEMCACHED_SUCCESS
            var copied: [UInt8] = []
            while let result = memcached_fetch_result(raw, rawResult, &rc) {
                copied = [UInt8](
                    UnsafeRawBufferPointer(start: memcached_result_value(result), count: memcached_result_length(result)))
                _ = memcached_result_cas(result) &+ UInt64(memcached_result_flags(result))
            }
            return copied.count
        }
    }
}

// memcached_get: the library's own one-call get (malloc'd value, freed here).
@MainActor func rawPlainGet(_ key: String) -> Int {
    var key = key
    return key.withUTF8 { bytes in
        bytes.withMemoryRebound(to: CChar.self) { chars in
            var length = 0
            var flags: UInt32 = 0
            var rc = MEMCACHED_SUCCESS
            let returned = memcached_get(raw, chars.baseAddress, chars.count, &length, &flags, &rc)
            free(returned)
            return length
        }
    }
}

@MainActor func rawSet(_ key: String) -> Int {
    var key = key
    return key.withUTF8 { bytes in
        bytes.withMemoryRebound(to: CChar.self) { chars in
            value.withUnsafeBytes { valueBytes in
                Int(
                    memcached_set(
                        raw, chars.baseAddress, chars.count, valueBytes.baseAddress!.assumingMemoryBound(to: CChar.self),
                        valueBytes.count, 0, 0
                    ).rawValue)
            }
        }
    }
}

@MainActor func wrapperGet(_ key: String) -> Int {
    if case .hit(let item) = wrapper.get(key) { return item.value.count }
    fatalError("wrapper get missed")
}

@MainActor func wrapperSet(_ key: String) -> Int {
    guard case .stored = wrapper.set(key, value: value) else { fatalError("wrapper set failed") }
    return 1
}

// Warm up both handles (connections, caches, branch predictors), then interleave the modes
// round by round so drift on the machine hits all of them alike.
let modes: [(String, @MainActor (String) -> Int)] = [
    ("get  C (mget+fetch_result)", rawGet), ("get  wrapper", wrapperGet), ("get  C (memcached_get)", rawPlainGet),
    ("set  C (memcached_set)", rawSet), ("set  wrapper", wrapperSet),
]
for (_, body) in modes { for key in keys.prefix(500) { sink &+= body(key) } }
for _ in 0..<rounds { for (name, body) in modes { measure(name, body) } }

func percentile(_ sorted: [UInt64], _ p: Double) -> Double {
    Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
}

func format(_ number: Double, _ decimals: Int = 1) -> String {
    var text = String(Int((number * pow(10, Double(decimals))).rounded()))
    if decimals > 0 {
        while text.count <= decimals { text = "0" + text }
        text.insert(".", at: text.index(text.endIndex, offsetBy: -decimals))
    }
    return text
}

func pad(_ text: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - text.count)) + text }

print("memcached \(server), one connection, \(valueSize)-byte values, \(rounds) rounds x \(operations) operations per mode")
print("mode                        ops/s all  ops/s best round  p50 µs  p99 µs")
var best: [String: Double] = [:]
var medians: [String: Double] = [:]
for (name, _) in modes {
    let sample = samples[name]!
    let sorted = sample.latencies.sorted()
    let all = Double(sample.count) / (Double(sample.elapsed) / 1e9)
    best[name] = Double(operations) / (Double(sample.bestRound) / 1e9)
    medians[name] = percentile(sorted, 0.50)
    print(
        name + String(repeating: " ", count: max(0, 28 - name.count)) + pad(format(all, 0), 9)
            + pad(format(best[name]!, 0), 18) + pad(format(percentile(sorted, 0.50), 1), 8)
            + pad(format(percentile(sorted, 0.99), 1), 8))
}
@MainActor func overhead(_ c: String, _ swift: String) -> String {
    "\(format((best[c]! / best[swift]! - 1) * 100))% ops/s (best round), \(format((medians[swift]! / medians[c]! - 1) * 100))% p50"
}
print("wrapper overhead vs the same C calls: get \(overhead("get  C (mget+fetch_result)", "get  wrapper"))")
print("                                      set \(overhead("set  C (memcached_set)", "set  wrapper"))")
if sink == 42 { print("") }

wrapper.close()
memcached_result_free(rawResult)
rawResult.deallocate()
memcached_free(raw)
