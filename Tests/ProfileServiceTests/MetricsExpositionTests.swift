@testable import ServiceRuntime
import Testing

@testable import ProfileService

/// The text `/metrics` answers, built from what the metrics backend renders: help from the
/// catalogue, process and build families added, everything in a stable order.
@Suite struct MetricsExpositionTests {
    static let build = MetricsExposition.Build(version: "1.2.3", revision: "abc123")

    func render(_ backend: String, process: ProcessStatistics? = nil) -> String {
        String(decoding: MetricsExposition.render(Array(backend.utf8), process: process, build: Self.build), as: UTF8.self)
    }

    @Test func familiesAreSortedAndEachHasTheCataloguesHelp() {
        let text = render(
            """
            # TYPE profile_service_http_queued_requests gauge
            profile_service_http_queued_requests 3.0
            # TYPE profile_service_cache_events_total counter
            profile_service_cache_events_total{event="miss"} 2
            profile_service_cache_events_total{event="hit"} 7

            """)
        let lines = text.split(separator: "\n").map(String.init)
        let typed = lines.filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
        #expect(typed == typed.sorted())
        #expect(typed == ["profile_service_build_info", "profile_service_cache_events_total", "profile_service_http_queued_requests"])
        let cache = lines.drop { !$0.contains("cache_events_total") }.prefix(4)
        #expect(Array(cache) == [
            "# HELP profile_service_cache_events_total \(MetricFamily.cacheEvents.help)",
            "# TYPE profile_service_cache_events_total counter",
            #"profile_service_cache_events_total{event="hit"} 7"#,
            #"profile_service_cache_events_total{event="miss"} 2"#,
        ])
        #expect(lines.contains(#"profile_service_build_info{version="1.2.3",revision="abc123"} 1"#))
    }

    @Test func aHistogramsSeriesKeepTheirBucketsTogetherAndInOrder() {
        let name = MetricFamily.httpRequestDuration.name
        let series = { (status: String) in
            """
            \(name)_bucket{status="\(status)",le="0.5"} 1
            \(name)_bucket{status="\(status)",le="+Inf"} 2
            \(name)_sum{status="\(status)"} 0.9
            \(name)_count{status="\(status)"} 2

            """
        }
        let text = render("# TYPE \(name) histogram\n" + series("500") + series("200"))
        let samples = text.split(separator: "\n").filter { $0.hasPrefix(name) }.map(String.init)
        #expect(samples == (series("200") + series("500")).split(separator: "\n").map(String.init))
    }

    @Test func theProcessFamiliesAreThoseOfEveryPrometheusClient() {
        let process = ProcessStatistics(
            cpuSeconds: 1.5, residentMemoryBytes: 40_000_000, virtualMemoryBytes: 1_000_000_000, openFileDescriptors: 17,
            maximumFileDescriptors: 1024, startTimeSeconds: 1_795_000_000.5, threads: 70)
        let text = render("", process: process)
        for line in [
            "process_cpu_seconds_total 1.5", "process_resident_memory_bytes 40000000", "process_open_fds 17",
            "process_max_fds 1024", "process_start_time_seconds 1795000000.5", "process_threads 70",
            "# TYPE process_cpu_seconds_total counter", "# HELP process_open_fds \(MetricFamily.processOpenFDs.help)",
        ] {
            #expect(text.contains(line + "\n"), "missing \(line)")
        }
        #expect(!render("", process: nil).contains("process_"))
    }

    @Test func theCatalogueFollowsPrometheusNaming() {
        #expect(Set(MetricFamily.all.map(\.name)).count == MetricFamily.all.count, "a name declared twice")
        for family in MetricFamily.all {
            #expect(family.name.hasPrefix(MetricFamily.prefix) || family.name.hasPrefix("process_"), "\(family.name)")
            #expect(family.name.hasSuffix("_total") == (family.kind == .counter), "\(family.name): counters, and only they, end in _total")
            #expect(!family.help.isEmpty && !family.help.contains("\n"), "\(family.name)")
            #expect(family.name.wholeMatch(of: /[a-z_][a-z0-9_]*/) != nil)
            #expect(family.labels.allSatisfy { $0.wholeMatch(of: /[a-z_][a-z0-9_]*/) != nil && $0 != "le" })
        }
    }
}

/// The `/proc` figures behind `process_*`.
@Suite struct ProcessStatisticsTests {
    @Test func fieldsAreCountedAfterTheCommandsLastParenthesis() throws {
        // A command name may hold spaces and parentheses (proc(5)): `(a) b)`.
        let stat =
            "4242 ((a) b) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 7 0 12345 1048576000 9766 "
            + "18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0"
        let statistics = try #require(
            ProcessStatistics.parse(
                stat: stat, systemStat: "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n", clockTicksPerSecond: 100,
                pageSize: 4096, openFileDescriptors: 12, maximumFileDescriptors: 1024))
        #expect(statistics.cpuSeconds == 3.0)  // (250 + 50) ticks at 100 a second
        #expect(statistics.threads == 7)
        #expect(statistics.startTimeSeconds == 1_700_000_123.45)
        #expect(statistics.virtualMemoryBytes == 1_048_576_000)
        #expect(statistics.residentMemoryBytes == 9766 * 4096)
        #expect(ProcessStatistics.parse(
            stat: "garbage", systemStat: "", clockTicksPerSecond: 100, pageSize: 4096, openFileDescriptors: 0,
            maximumFileDescriptors: 0) == nil)
    }

    @Test func theRunningProcessHasPlausibleFigures() throws {
        let statistics = try #require(ProcessStatistics.current())
        #expect(statistics.residentMemoryBytes > 1_000_000)
        #expect(statistics.openFileDescriptors > 2 && statistics.openFileDescriptors <= statistics.maximumFileDescriptors)
        #expect(statistics.threads >= 1)
        let now = Double(WallClock.unixSeconds())
        #expect(statistics.startTimeSeconds <= now + 1 && statistics.startTimeSeconds > now - 24 * 3600)
    }
}
