import Foundation
import Glibc
import Testing
import TestSupport

/// Logs, metrics, health and graceful shutdown of the built binary.
@Suite(.serialized, .requires(.postgres, .memcached)) struct ObservabilityEndToEndTests {
    @Test func metricsAndJSONLogsCarryTheDocumentedFields() throws {
        let service = try ServiceProcess(extraArguments: ["--log-format", "json"])
        defer { _ = service.terminate() }
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        let url = "\(service.baseURL)/users/profile/\(id)"
        _ = try Curl.request(
            url, method: "PUT",
            headers: ServiceProcess.writeHeaders(for: id).merging(["If-None-Match": "*"]) { $1 },
            body: #"{"username":"m\#(id % 1_000_000)","display_name":"Metrics"}"#)
        for _ in 0..<3 { _ = try Curl.request(url) }
        let traced = try Curl.request(url, headers: ["X-Request-ID": "trace-42"])
        #expect(traced.headers["x-request-id"] == "trace-42")
        #expect(try Curl.request("\(service.baseURL)/users/profile/\(id + 1)").status == 404)
        let generated = try Curl.request(url, headers: ["X-Request-ID": "bad id with spaces"])
        #expect(generated.headers["x-request-id"]?.count == 16, "a malformed id is replaced")

        let scrape = try Curl.request("\(service.baseURL)/metrics")
        #expect(scrape.status == 200)
        #expect(scrape.headers["cache-control"] == "no-store")
        #expect(try Curl.request("\(service.baseURL)/healthz").headers["cache-control"] == "no-store")
        #expect(scrape.headers["content-type"]?.hasPrefix("text/plain") == true)
        let metrics = PrometheusText(scrape.body)
        func value(_ name: String, _ labels: [String: String]) -> Double? { metrics.value(name, labels) }
        #expect(value("profile_service_http_requests_total", ["route": "/users/profile/{id}", "method": "GET", "status": "200"]) ?? 0 >= 5)
        #expect(value("profile_service_http_requests_total", ["route": "/users/profile/{id}", "method": "PUT", "status": "201"]) == 1)
        #expect(value("profile_service_http_requests_total", ["route": "/users/profile/{id}", "method": "GET", "status": "404"]) == 1)
        #expect(value("profile_service_http_request_duration_seconds_count", ["route": "/users/profile/{id}", "method": "GET", "status": "200"]) ?? 0 >= 5)
        #expect(metrics.samples.contains { $0.name == "profile_service_http_request_duration_seconds_bucket" && $0.labels["le"] == "+Inf" })
        #expect(value("profile_service_cache_events_total", ["event": "hit"]) ?? 0 >= 4)
        #expect(value("profile_service_cache_events_total", ["event": "write_through_stored"]) ?? 0 >= 1)
        for event in ["miss", "error", "bypass", "populate_stored", "populate_lost", "write_through_skipped_newer",
            "write_through_cas_conflict", "write_through_deleted", "write_through_failed"]
        {
            #expect(value("profile_service_cache_events_total", ["event": event]) != nil, "missing event \(event)")
        }
        #expect(value("profile_service_log_lines_dropped_total", [:]) == 0)
        for gauge in ["profile_service_http_open_connections", "profile_service_http_queued_requests", "profile_service_http_busy_workers"] {
            #expect(value(gauge, [:]) != nil, "missing gauge \(gauge)")
        }

        let log = service.log(waitingUntil: { $0.contains("trace-42") })
        let lines = log.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: String]
        }
        #expect(lines.count == log.split(separator: "\n").count, "every log line is one JSON object")
        let access = try #require(lines.first { $0["request_id"] == "trace-42" })
        #expect(access["msg"] == "request")
        #expect(access["method"] == "GET")
        #expect(access["path"] == "/users/profile/\(id)")
        #expect(access["status"] == "200")
        #expect(access["cache"] == "hit")
        #expect(Int(access["bytes"] ?? "") ?? 0 > 50)
        #expect(Double(access["duration_ms"] ?? "") != nil)
        #expect(access["ts"]?.hasSuffix("Z") == true)
        #expect(access["level"] == "info")
    }

    /// `/metrics` as Prometheus's linter reads it: every family with its help and type, in the
    /// same order on every scrape, one prefix, the process and build families, and the state of
    /// each configured memcached node and of the primary.
    @Test func metricsExplainThemselvesInAStableOrder() throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        _ = try Curl.request("\(service.baseURL)/users/profile/\(Int64.random(in: 1_000_000...9_000_000_000))")
        let first = try Curl.request("\(service.baseURL)/metrics").body
        let lines = first.split(separator: "\n").map(String.init)
        let typed = lines.filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) }
        let helped = lines.filter { $0.hasPrefix("# HELP ") }.map { String($0.split(separator: " ")[2]) }
        #expect(typed.count > 30)
        #expect(helped == typed, "every family has one # HELP, right before its # TYPE")
        #expect(typed == typed.sorted(), "families are sorted by name")
        for name in typed {
            #expect(name.hasPrefix("profile_service_") || name.hasPrefix("process_"), "\(name) has neither prefix")
        }
        let metrics = PrometheusText(first)
        #expect(metrics.value("process_resident_memory_bytes") ?? 0 > 1_000_000)
        #expect(metrics.value("process_open_fds") ?? 0 > 3)
        #expect(metrics.value("process_max_fds") ?? 0 >= metrics.value("process_open_fds") ?? .infinity)
        let started = metrics.value("process_start_time_seconds") ?? 0
        #expect(abs(started - Date().timeIntervalSince1970) < 600)
        #expect(metrics.value("profile_service_build_info") == 1)
        #expect(metrics.samples.first { $0.name == "profile_service_build_info" }?.labels["version"]?.isEmpty == false)
        #expect(metrics.value("profile_service_database_up") == 1)
        for node in TestEnvironment.memcachedServerList.split(separator: ",") {
            #expect(metrics.value("profile_service_memcached_node_up", ["node": String(node)]) == 1, "node \(node)")
        }
        let second = try Curl.request("\(service.baseURL)/metrics").body
        let typedAgain = second.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) }
        #expect(typedAgain == typed)
    }

    @Test func logfmtEscapesUserText() throws {
        let service = try ServiceProcess(extraArguments: ["--log-format", "logfmt"])
        defer { _ = service.terminate() }
        _ = try Curl.request("\(service.baseURL)/users/profile/%22x%20y=z%0A")
        let log = service.log(waitingUntil: { $0.contains("/users/profile/") })
        let line = try #require(log.split(separator: "\n").first { $0.contains("/users/profile/") })
        #expect(line.contains(#"path="/users/profile/%22x%20y=z%0A""#), "a value with '=' is quoted")
        #expect(line.contains("status=400"))
    }

    @Test func sigtermTurnsReadinessOffFirstThenDrainsAndExitsZero() throws {
        let service = try ServiceProcess(extraArguments: ["--shutdown-delay-s", "2"])
        #expect(try Curl.request("\(service.baseURL)/readyz").status == 200)
        kill(service.processIdentifier, SIGTERM)
        // The signal is handled asynchronously: wait for readiness to turn off, well inside the
        // 2 s before the listener closes.
        var readiness = try Curl.request("\(service.baseURL)/readyz")
        #expect(try Eventually.wait(timeout: .seconds(1)) {
            readiness = try Curl.request("\(service.baseURL)/readyz")
            return readiness.status == 503
        }, "the gateway must see the drain before the listener closes")
        #expect(readiness.json?["status"] as? String == "draining")
        #expect(readiness.headers["cache-control"] == "no-store")
        #expect(try Curl.request("\(service.baseURL)/healthz").status == 200, "requests are still served meanwhile")
        #expect(service.waitUntilExit() == 0)
        #expect(service.log.contains("stopped"))
    }

    /// Lines are written by a thread of the log sink, a few milliseconds late: a SIGTERM right after
    /// a request must still leave that request's access line, and the last line, in the log.
    @Test func sigtermKeepsTheLastLogLines() throws {
        let service = try ServiceProcess()
        let requestID = "last-\(UInt32.random(in: 0...UInt32.max))"
        #expect(try Curl.request("\(service.baseURL)/healthz", headers: ["X-Request-ID": requestID]).status == 200)
        kill(service.processIdentifier, SIGTERM)
        #expect(service.waitUntilExit() == 0)
        let lines = service.log.split(separator: "\n")
        #expect(lines.contains { $0.contains("msg=request") && $0.contains("request_id=\(requestID)") })
        // The command's last line. (Within one batch lines are grouped by thread, so another
        // thread's line of the same milliseconds may follow it: docs/design.md §6.1.)
        #expect(lines.contains { $0.contains("level=notice") && $0.contains("msg=stopped") }, "\(lines.suffix(4))")
    }
}
