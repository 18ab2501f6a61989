// swift-tools-version:6.2
import PackageDescription

// Strictness as a habit: the same upcoming features Hummingbird builds with.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

// The server binary's resident memory (issue 15). Linked by lld with packed relative relocations
// (DT_RELR, glibc 2.36+), the ~150,000 relocations a static Swift runtime brings take kilobytes
// instead of a 3.5 MB table that the loader reads, page by page, at every start. The static
// runtime's link also asks for -export-dynamic: 55,000 dynamic symbols (3 MB of tables the loader
// touches) that nothing looks up, since no plugin is loaded into the server.
let relaisLinkerSettings: [LinkerSetting] = [
    .unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic"], .when(platforms: [.linux]))
]

// Platforms. The server's targets need macOS 15 (Synchronization's Mutex, among others), and
// SwiftPM has one floor per package, not per target. RelaisKit itself uses nothing newer than
// iOS 15 / macOS 12 (async URLSession, CryptoKit's Secure Enclave keys, App Attest), so the iOS
// floor is 15: the server targets are never built for iOS, and an iOS app that picks RelaisKit
// builds only RelaisKit and swift-crypto. macOS stays at 15 so that the server keeps building on
// macOS; a macOS app below 15 cannot depend on this package until RelaisKit moves to a package of
// its own (docs/app-developers.md says so).
let package = Package(
    name: "relais",
    platforms: [.macOS(.v15), .iOS(.v15)],
    products: [
        .executable(name: "relais", targets: ["relais"]),
        .library(name: "RelaisHTTPClient", targets: ["RelaisHTTPClient"]),
        .library(name: "RelaisStore", targets: ["RelaisStore"]),
        .library(name: "RelaisJOSE", targets: ["RelaisJOSE"]),
        // The client library for apps (iOS, macOS, Linux): Foundation and swift-crypto only.
        .library(name: "RelaisKit", targets: ["RelaisKit"]),
        .executable(name: "relais-app", targets: ["relais-app"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: [.defaults, "YAML"]),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        // X.509 chains and DER for App Attest; swift-crypto comes with them (P-256 assertions).
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // Traces: the API in the libraries, the OTLP/HTTP exporter only in the executable (no gRPC:
        // it would double the build and the binary).
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel", .upToNextMinor(from: "1.6.0"), traits: ["OTLPHTTP"]),
    ],
    targets: [
        // Native bridges: Debian's libraries through pkg-config, with static inline shims for the
        // variadic and macro APIs Swift cannot call.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // hiredis is found on the default include path: its pkg-config file adds -D_FILE_OFFSET_BITS=64,
        // which SwiftPM drops with a warning (harmless on 64-bit).
        .systemLibrary(name: "CHiredis"),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // libssl, only for the TLS tunnel to rediss:// servers (hiredis 0.14 has no TLS of its own).
        .systemLibrary(name: "COpenSSLTLS", pkgConfig: "libssl", providers: [.apt(["libssl-dev"])]),
        // libqrencode, for the QR codes of sign-in on another device.
        // glibc's functions that Swift's Glibc module leaves out (malloc_trim, getrandom).
        .systemLibrary(name: "CLibc"),
        .systemLibrary(name: "CQRencode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),

        .target(name: "RelaisClock", swiftSettings: swiftSettings),
        .target(name: "RelaisQRCode", dependencies: ["CQRencode"], swiftSettings: swiftSettings),
        .target(
            name: "RelaisCrypto",
            dependencies: ["COpenSSL", .target(name: "CLibc", condition: .when(platforms: [.linux]))],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RelaisJOSE",
            dependencies: ["COpenSSL", "RelaisCrypto"],
            swiftSettings: swiftSettings
        ),
        // Proof of a genuine app on a genuine device: Apple App Attest and Google Play Integrity
        // verdicts, checked without the relay (the `relais attest` command uses it alone).
        .target(
            name: "RelaisAttest",
            dependencies: [
                "RelaisCrypto",
                "RelaisHTTPClient",
                "RelaisJOSE",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RelaisHTTPClient",
            dependencies: [
                "CCurl",
                "CLibc",
                "RelaisCrypto",
                // Only for HTTPKeySetFetcher: JWKS documents fetched through libcurl.
                "RelaisJOSE",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RelaisStore",
            dependencies: [
                "CHiredis",
                "RelaisClock",
                "RelaisCrypto",
                "COpenSSLTLS",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RelaisConfig",
            dependencies: [
                // The attestation settings are the verifiers' own policy types, checked at load.
                "RelaisAttest",
                "RelaisHTTPClient",
                "RelaisJOSE",
                "RelaisStore",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RelaisServer",
            dependencies: [
                "CLibc",
                "RelaisClock",
                "RelaisConfig",
                "RelaisCrypto",
                "RelaisHTTPClient",
                "RelaisJOSE",
                "RelaisStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RelaisOIDC",
            dependencies: [
                "RelaisClock",
                "RelaisConfig",
                "RelaisCrypto",
                "RelaisHTTPClient",
                "RelaisJOSE",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RelaisRelay",
            dependencies: [
                "RelaisAttest",
                "RelaisClock",
                "RelaisConfig",
                "RelaisCrypto",
                "RelaisHTTPClient",
                "RelaisJOSE",
                "RelaisOIDC",
                "RelaisQRCode",
                "RelaisServer",
                "RelaisStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RelaisDevProvider",
            dependencies: [
                "RelaisClock",
                "RelaisConfig",
                "RelaisCrypto",
                "RelaisHTTPClient",
                "RelaisJOSE",
                "RelaisServer",
                "RelaisStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // OpenTelemetry: the OTEL_* variables checked, the OTLP/HTTP span exporter and its drop counter.
        // Only the executable links it; the libraries speak the swift-distributed-tracing API.
        .target(
            name: "RelaisTelemetry",
            dependencies: [
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "relais",
            dependencies: [
                "RelaisTelemetry",
                "RelaisAttest",
                "RelaisClock",
                "RelaisConfig",
                "RelaisDevProvider",
                "RelaisRelay",
                "RelaisServer",
                "RelaisJOSE",
                "RelaisHTTPClient",
                "RelaisOIDC",
                "RelaisStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings,
            linkerSettings: relaisLinkerSettings
        ),
        .executableTarget(
            name: "relais-bench",
            dependencies: [
                .target(name: "CLibc", condition: .when(platforms: [.linux])),
                "RelaisAttest",
                "RelaisClock",
                "RelaisCrypto",
                "RelaisHTTPClient",
                "RelaisJOSE",
                "RelaisServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),

        // The app side (issue 32): no NIO, no Hummingbird, no C module, no server module, so that an
        // app which picks the RelaisKit product builds it and swift-crypto only.
        .target(
            name: "RelaisKit",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "relais-app",
            dependencies: ["RelaisKit", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),

        // Test support: real redis-server processes and a loopback HTTP server.
        .target(
            name: "RelaisTestSupport",
            dependencies: [
                // InProcessServer: the relay and the development provider served by the test process.
                "RelaisClock", "RelaisConfig", "RelaisDevProvider", "RelaisJOSE", "RelaisRelay",
                // AppAttestFactory and PlayIntegrityFactory: platform proofs made with test keys and CAs.
                "RelaisAttest", "RelaisCrypto",
                // OpenSSLErrorQueue: tests read the thread's OpenSSL error queue.
                "COpenSSL",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Tests/RelaisTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "RelaisCryptoTests", dependencies: ["RelaisCrypto", "RelaisTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "RelaisQRCodeTests", dependencies: ["RelaisQRCode", "RelaisTestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "RelaisJOSETests",
            dependencies: [
                "RelaisJOSE", "RelaisCrypto", "RelaisHTTPClient", "RelaisTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            resources: [.copy("Vectors")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RelaisAttestTests",
            dependencies: [
                "RelaisAttest", "RelaisCrypto", "RelaisJOSE", "RelaisHTTPClient", "RelaisTestSupport",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RelaisTelemetryTests",
            dependencies: ["RelaisTelemetry", "RelaisTestSupport", .product(name: "Logging", package: "swift-log"), .product(name: "Metrics", package: "swift-metrics")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RelaisHTTPClientTests",
            dependencies: [
                "RelaisHTTPClient", "RelaisTestSupport", .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                // relais_accept_from_self (the check that another process is refused), relais_accept4.
                "CLibc",
                // EventLoopTaskExecutor: calls made from an event loop, as request handlers make them.
                "RelaisServer", "RelaisStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RelaisStoreTests",
            dependencies: [
                "RelaisStore", "RelaisTestSupport", .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                // EventLoopTaskExecutor: store calls made from an event loop, as request handlers make them.
                "RelaisServer",
                // EmbeddedChannel: the Redis channel handler tested without a socket.
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RelaisConfigTests",
            dependencies: ["RelaisConfig", "RelaisHTTPClient", "RelaisStore", "RelaisJOSE", "RelaisTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RelaisRelayTests",
            dependencies: [
                "RelaisRelay", "RelaisDevProvider", "RelaisServer", "RelaisConfig", "RelaisHTTPClient", "RelaisJOSE", "RelaisCrypto", "RelaisClock",
                "RelaisTestSupport", "RelaisStore", "RelaisOIDC",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RelaisDevProviderTests",
            dependencies: [
                "RelaisDevProvider", "RelaisServer", "RelaisConfig", "RelaisHTTPClient", "RelaisJOSE", "RelaisCrypto", "RelaisTestSupport", "RelaisClock",
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RelaisOIDCTests",
            dependencies: [
                "RelaisOIDC", "RelaisConfig", "RelaisJOSE", "RelaisClock", "RelaisHTTPClient", "RelaisCrypto", "RelaisTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RelaisKitTests",
            dependencies: [
                "RelaisKit", "RelaisTestSupport", "RelaisClock", "RelaisHTTPClient", "RelaisJOSE", "RelaisQRCode",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            resources: [.copy("Vectors")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RelaisServerTests",
            dependencies: [
                "RelaisAttest", "RelaisCrypto",
                "RelaisServer", "RelaisConfig", "RelaisStore", "RelaisHTTPClient", "RelaisTestSupport", "RelaisJOSE",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
