public import Logging
public import NIOCore
public import RelaisConfig
import RelaisServer
import ServiceLifecycle
import UnixSignals

/// Runs `relais dev-provider` until SIGTERM or SIGINT, on the same server skeleton as the relay
/// (request ids, logs, metrics, /healthz, /readyz, graceful drain).
public enum DevProviderRunner {
    public static func run(
        configuration: DevProviderConfiguration,
        logger: Logger,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) async throws {
        var server = RelaisConfiguration()
        server.server = configuration.server
        server.log = configuration.log
        server.store = configuration.store
        let dependencies = RelaisDependencies.make(for: server, logger: logger)
        let provider: DevProvider
        do {
            provider = try await DevProvider.make(configuration: configuration, store: dependencies.store, httpClient: dependencies.httpClient, logger: logger)
        } catch {
            await dependencies.shutdown()
            throw error
        }
        let group = RelaisRunner.makeServiceGroup(
            configuration: server,
            dependencies: dependencies,
            logger: logger,
            signals: [.sigterm, .sigint],
            onServerRunning: onServerRunning,
            additionalRoutes: provider.register(on:)
        )
        logger.notice(
            "development provider starting: not for production use",
            metadata: [
                "address": "\(configuration.server.host):\(configuration.server.port)",
                "issuer": "\(provider.issuer)",
                "mode": "\(configuration.provider.mode.rawValue)",
                "clients": "\(configuration.clients.map(\.id).joined(separator: ","))",
                "identities": "\(configuration.identities.count)",
                "store": "\(configuration.store.kind.rawValue)",
                "test_api": "\(configuration.provider.testAPI)",
            ]
        )
        do {
            try await group.run()
        } catch {
            await dependencies.shutdown()
            throw error
        }
        await dependencies.shutdown()
        logger.info("development provider stopped")
    }
}
