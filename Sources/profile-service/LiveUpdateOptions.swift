import ArgumentParser
import HTTPServer

/// Options of the live updates (Server-Sent Events, docs/design.md §4).
struct LiveUpdateOptions: ParsableArguments {
    @Option(help: "Event streams open at most; beyond, 503 with Retry-After. [PROFILE_MAX_SUBSCRIBERS]")
    var maxSubscribers: Int = EnvironmentDefaults.int("PROFILE_MAX_SUBSCRIBERS", 10_000)

    @Option(help: "Seconds between heartbeat comments on every event stream. [PROFILE_SSE_HEARTBEAT_S]")
    var sseHeartbeatS: Int = EnvironmentDefaults.int("PROFILE_SSE_HEARTBEAT_S", 15)

    @Option(
        help: "Unsent bytes a stream may hold before its reader is cut as too slow. [PROFILE_SSE_BUFFER_BYTES]")
    var sseBufferBytes: Int = EnvironmentDefaults.int("PROFILE_SSE_BUFFER_BYTES", 64 * 1024)

    func validate() throws {
        try EnvironmentDefaults.validate()
        guard (0...1_000_000).contains(maxSubscribers) else {
            throw ValidationError("--max-subscribers must be 0…1000000, got \(maxSubscribers)")
        }
        guard (1...3600).contains(sseHeartbeatS) else {
            throw ValidationError("--sse-heartbeat-s must be 1…3600, got \(sseHeartbeatS)")
        }
        guard (1024...16 * 1024 * 1024).contains(sseBufferBytes) else {
            throw ValidationError("--sse-buffer-bytes must be 1024…16777216, got \(sseBufferBytes)")
        }
    }

    func streamsConfiguration() -> EventStreams.Configuration {
        var configuration = EventStreams.Configuration()
        configuration.maxSubscribers = maxSubscribers
        configuration.heartbeatInterval = .seconds(sseHeartbeatS)
        configuration.maxBufferedBytes = sseBufferBytes
        return configuration
    }
}
