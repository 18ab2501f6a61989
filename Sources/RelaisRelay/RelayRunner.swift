public import Logging
public import NIOCore
public import RelaisClock
public import RelaisConfig
import RelaisServer

/// Runs `relais serve`: the server skeleton (health, metrics, drain) with the relay's routes.
public enum RelayRunner {
    public static func run(
        configuration: RelaisConfiguration,
        logger: Logger,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in },
        clock: any RelaisClock = SystemClock()
    ) async throws {
        try await RelaisRunner.run(
            configuration: configuration,
            logger: logger,
            name: "relais",
            metadata: [
                "public_base_url": "\(configuration.server.publicBaseURL)",
                "environment": "\(configuration.server.environment.rawValue)",
                "providers": "\(configuration.providers.map(\.id).joined(separator: ","))",
                "apps": "\(configuration.apps.count)",
            ],
            onServerRunning: onServerRunning,
            clock: clock
        ) { dependencies in
            let relay = try await Relay(configuration: configuration, store: dependencies.store, httpClient: dependencies.httpClient, clock: clock)
            return relay.register(on:)
        }
    }
}
