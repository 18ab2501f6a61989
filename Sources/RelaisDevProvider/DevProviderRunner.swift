public import Logging
public import NIOCore
public import RelaisClock
public import RelaisConfig
public import RelaisJOSE
public import RelaisServer

/// Runs `relais dev-provider` until SIGTERM or SIGINT, on the same server skeleton as the relay
/// (request ids, logs, metrics, /healthz, /readyz, graceful drain).
public enum DevProviderRunner {
    public static func run(
        configuration: DevProviderConfiguration,
        logger: Logger,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in },
        clock: any RelaisClock = SystemClock(),
        generateKey: @escaping KeyGenerator = JWK.freshKey,
        tracing: TracingBackend? = nil
    ) async throws {
        var server = RelaisConfiguration()
        server.server = configuration.server
        server.log = configuration.log
        server.store = configuration.store
        let issuer = configuration.server.publicBaseURL + (configuration.provider.mode == .v1 ? "/api/v1" : "/api/v2")
        try await ServerSkeleton.run(
            configuration: server,
            logger: logger,
            name: "development provider",
            startLevel: .notice,
            metadata: [
                "issuer": "\(issuer)",
                "mode": "\(configuration.provider.mode.rawValue)",
                "clients": "\(configuration.clients.map(\.id).joined(separator: ","))",
                "identities": "\(configuration.identities.count)",
                "test_api": "\(configuration.provider.testAPI)",
                "warning": "not for production use",
            ],
            onServerRunning: onServerRunning,
            clock: clock,
            tracing: tracing
        ) { _, dependencies in
            let provider = try await DevProvider.make(
                configuration: configuration, store: dependencies.store, httpClient: dependencies.httpClient, logger: logger, clock: clock,
                generateKey: generateKey
            )
            return provider.register(on:)
        }
    }
}
