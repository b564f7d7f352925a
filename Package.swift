// swift-tools-version:6.1
import PackageDescription

// Enforce the module arrows: imports are internal unless marked `public`, so a C type
// cannot leak into a wrapper's public API by accident.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "profile-service",
    // The minimums of the ProfileClient library, the one product apps link (docs/client.md,
    // "Platforms", says why each). The service and its tools run on Linux only, where these are
    // ignored; they use Synchronization (macOS 15) and epoll.
    platforms: [.iOS(.v16), .macOS(.v13), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .executable(name: "profile-service", targets: ["profile-service"]),
        .library(name: "ProfileClient", targets: ["ProfileClient"]),
        // For an app's unit tests and SwiftUI previews, not the app: the service in memory.
        .library(name: "ProfileClientTesting", targets: ["ProfileClientTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    ],
    targets: [
        // C modules: a modulemap and a header each; only these include C headers.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CLibMemcached",
            pkgConfig: "libmemcached",
            providers: [.apt(["libmemcached-dev"])]
        ),
        .target(name: "CLinuxShims"),

        // The runtime plumbing every module shares: Duration units, fixed threads and their sleeps,
        // wall-clock time, the log sink, the lifecycle of background services.
        .target(name: "ServiceRuntime", dependencies: ["CLinuxShims"], swiftSettings: swiftSettings),
        // Pure HTTP/1.1: parser, encoder, request/response values. Standard library only.
        .target(name: "HTTP1", swiftSettings: swiftSettings),
        // Sockets, epoll loop, connection state machines, worker pool, Responder protocol.
        .target(
            name: "HTTPServer",
            dependencies: [
                "HTTP1", "CLinuxShims", "ServiceRuntime",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Safe Swift over libpq.
        .target(
            name: "PostgresClient",
            dependencies: ["CLibPQ", "ServiceRuntime", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        // Safe Swift over libmemcached.
        .target(
            name: "MemcachedClient",
            dependencies: ["CLibMemcached", "ServiceRuntime", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        // The profile domain: model, store and cache protocols, cache protocol, routes.
        .target(
            name: "ProfileService",
            dependencies: [
                "HTTP1", "HTTPServer", "PostgresClient", "MemcachedClient", "ProfileAuth", "ServiceRuntime",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // Bearer-token verification (JWT over swift-crypto) and the owner-or-admin rule.
        .target(
            name: "ProfileAuth",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "profile-service",
            dependencies: [
                "ProfileService", "ProfileAuth", "HTTPServer", "PostgresClient", "MemcachedClient", "ServiceRuntime",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        // Prints memcached get/set figures: MemcachedConnection vs the same libmemcached calls.
        // Not a test; scripts/bench-clients-mc.sh builds it in release and runs it.
        .executableTarget(
            name: "MemcachedBenchmark",
            dependencies: ["MemcachedClient", "CLibMemcached", .product(name: "Logging", package: "swift-log")],
            path: "Benchmarks/MemcachedBenchmark",
            swiftSettings: swiftSettings
        ),
        // Client library for apps: read-your-writes, optimistic updates, observation. Foundation only.
        .target(name: "ProfileClient", swiftSettings: swiftSettings),
        // profile-service in memory, as a transport: for apps' tests and previews.
        .target(name: "ProfileClientTesting", dependencies: ["ProfileClient"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "profilectl",
            dependencies: ["ProfileClient", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),
        // Shared test helpers: environment of the local servers, loopback clients.
        .target(
            name: "TestSupport",
            dependencies: ["HTTP1"],
            swiftSettings: swiftSettings
        ),

        // Tests without servers: in-memory memcached and PostgreSQL with the semantics the cache
        // protocol relies on, the fault wrappers and scenarios the tests share, and the service's
        // responder in process (request in, response out, no socket).
        .target(
            name: "ProfileServiceTesting",
            dependencies: [
                "ProfileService", "ProfileAuth", "HTTP1", "HTTPServer", "MemcachedClient", "PostgresClient", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // Unit targets: no server needed.
        .testTarget(
            name: "CacheProtocolTests",
            dependencies: ["ProfileServiceTesting", "ProfileService", "MemcachedClient", "PostgresClient", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "ServiceRuntimeTests", dependencies: ["ServiceRuntime"], swiftSettings: swiftSettings),
        .testTarget(
            name: "RouteTests",
            dependencies: ["ProfileServiceTesting", "ProfileService", "ProfileAuth", "HTTP1", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProfileAuthTests",
            dependencies: [
                "ProfileAuth",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "HTTP1Tests", dependencies: ["HTTP1"], swiftSettings: swiftSettings),
        .testTarget(
            name: "HTTPServerTests",
            dependencies: ["HTTPServer", "HTTP1", "ServiceRuntime", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PostgresClientTests",
            dependencies: ["PostgresClient", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "MemcachedClientTests",
            dependencies: ["MemcachedClient", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProfileServiceTests",
            dependencies: [
                "ProfileService", "HTTP1", "HTTPServer", "TestSupport", "ProfileServiceTesting", "PostgresClient", "MemcachedClient",
                "ServiceRuntime",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProfileClientTests",
            dependencies: ["ProfileClient", "ProfileClientTesting", "TestSupport"],
            swiftSettings: swiftSettings
        ),

        // Integration targets: the real PostgreSQL and memcached of scripts/deps.sh. Each suite
        // is marked `.requires(...)`: with a server missing it fails once, saying how to start it.
        .testTarget(
            name: "PostgresClientIntegrationTests",
            dependencies: ["PostgresClient", "TestSupport", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "MemcachedClientIntegrationTests",
            dependencies: ["MemcachedClient", "TestSupport", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProfileServiceIntegrationTests",
            dependencies: [
                "ProfileService", "HTTP1", "HTTPServer", "TestSupport", "ProfileServiceTesting", "PostgresClient", "MemcachedClient",
                "ServiceRuntime", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProfileClientIntegrationTests",
            dependencies: [
                "ProfileClient", "TestSupport", "MemcachedClient", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["TestSupport", "PostgresClient", "MemcachedClient", "ProfileAuth"],
            swiftSettings: swiftSettings
        ),
    ]
)
