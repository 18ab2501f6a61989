public import Logging
public import NIOCore
public import RelaisConfig
import RelaisServer
import ServiceLifecycle
import UnixSignals

/// Runs `relais serve`: the server skeleton (health, metrics, drain) with the relay's routes.
public enum RelayRunner {
    public static func run(
        configuration: RelaisConfiguration,
        logger: Logger,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) async throws {
        let dependencies = RelaisDependencies.make(for: configuration, logger: logger)
        let relay: Relay
        do {
            relay = try await Relay(configuration: configuration, store: dependencies.store, httpClient: dependencies.httpClient, logger: logger)
        } catch {
            await dependencies.shutdown()
            throw error
        }
        let group = RelaisRunner.makeServiceGroup(
            configuration: configuration,
            dependencies: dependencies,
            logger: logger,
            signals: [.sigterm, .sigint],
            onServerRunning: onServerRunning,
            additionalRoutes: relay.register(on:)
        )
        logger.info(
            "relais starting",
            metadata: [
                "address": "\(configuration.server.host):\(configuration.server.port)",
                "public_base_url": "\(configuration.server.publicBaseURL)",
                "store": "\(configuration.store.kind.rawValue)",
                "environment": "\(configuration.server.environment.rawValue)",
                "providers": "\(configuration.providers.map(\.id).joined(separator: ","))",
                "apps": "\(configuration.apps.count)",
            ]
        )
        do {
            try await group.run()
        } catch {
            await dependencies.shutdown()
            throw error
        }
        await dependencies.shutdown()
        logger.info("relais stopped")
    }
}
