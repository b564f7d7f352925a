import ArgumentParser
import HTTPServer

/// Options of the live updates (Server-Sent Events, docs/design.md §4).
struct LiveUpdateOptions: ParsableArguments {
    @Option(
        help: """
            Event streams open at most; beyond, 503 with Retry-After. At most 90 % of \
            --max-connections, so streams leave room for other requests. [PROFILE_MAX_SUBSCRIBERS]
            """)
    var maxSubscribers: Int = EnvironmentDefaults.int("PROFILE_MAX_SUBSCRIBERS", 5_000)

    @Option(
        help: """
            Profiles followed by all event streams together (a profile's stream follows one, a \
            list's stream up to 1,000); beyond, 503 with Retry-After. About 150 bytes each. \
            [PROFILE_MAX_STREAM_SUBSCRIPTIONS]
            """)
    var maxStreamSubscriptions: Int = EnvironmentDefaults.int("PROFILE_MAX_STREAM_SUBSCRIPTIONS", 500_000)

    @Option(
        help: """
            Event streams one client may hold open (a token's subject, else its address, see \
            --trusted-proxy-hops); beyond, 429 with Retry-After; 0 for no limit. \
            [PROFILE_MAX_STREAMS_PER_CLIENT]
            """)
    var maxStreamsPerClient: Int = EnvironmentDefaults.int("PROFILE_MAX_STREAMS_PER_CLIENT", 32)

    @Option(
        help: """
            Seconds an event stream stays open at most (less up to 10 %); the client resumes with \
            Last-Event-ID and misses nothing; 0 for no limit. A stream also ends when the token \
            that opened it expires. [PROFILE_SSE_MAX_LIFETIME_S]
            """)
    var sseMaxLifetimeS: Int = EnvironmentDefaults.int("PROFILE_SSE_MAX_LIFETIME_S", 3600)

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
        guard (0...100_000_000).contains(maxStreamSubscriptions) else {
            throw ValidationError("--max-stream-subscriptions must be 0…100000000, got \(maxStreamSubscriptions)")
        }
        guard (0...1_000_000).contains(maxStreamsPerClient) else {
            throw ValidationError("--max-streams-per-client must be 0…1000000, got \(maxStreamsPerClient)")
        }
        guard (0...604_800).contains(sseMaxLifetimeS) else {
            throw ValidationError("--sse-max-lifetime-s must be 0…604800, got \(sseMaxLifetimeS)")
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
        configuration.maxSubscriptions = maxStreamSubscriptions
        configuration.maxSubscribersPerClient = maxStreamsPerClient
        configuration.maxLifetime = sseMaxLifetimeS > 0 ? .seconds(sseMaxLifetimeS) : nil
        configuration.heartbeatInterval = .seconds(sseHeartbeatS)
        configuration.maxBufferedBytes = sseBufferBytes
        return configuration
    }
}
