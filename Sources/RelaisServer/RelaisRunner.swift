public import Hummingbird
public import Logging
public import NIOCore
public import RelaisConfig
public import ServiceLifecycle
public import UnixSignals

/// The server skeleton's lifecycle: until SIGTERM or SIGINT, then a drain: /readyz turns 503, the
/// listener closes, in-flight requests get up to `server.drain_timeout` to finish. The programs
/// (`RelayRunner`, `DevProviderRunner`) close the store and the outbound client last.
public enum RelaisRunner {
    /// The server and the drain watcher as one service group; graceful shutdown starts on the given
    /// signals or on `triggerGracefulShutdown()`.
    public static func makeServiceGroup(
        configuration: RelaisConfiguration,
        dependencies: RelaisDependencies,
        logger: Logger,
        signals: [UnixSignal],
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in },
        additionalRoutes: (Router<RelaisRequestContext>) -> Void = { _ in }
    ) -> ServiceGroup {
        let application = RelaisApplication.makeApplication(
            configuration: configuration,
            dependencies: dependencies,
            logger: logger,
            onServerRunning: onServerRunning,
            additionalRoutes: additionalRoutes
        )
        var groupConfiguration = ServiceGroupConfiguration(
            // Graceful shutdown reaches services in reverse order: the drain flag flips first, then
            // the server stops accepting and waits for in-flight requests.
            services: [
                .init(service: application),
                .init(service: DrainWatcher(state: dependencies.drainState, logger: logger)),
            ],
            gracefulShutdownSignals: signals,
            cancellationSignals: [],
            logger: logger
        )
        // Past the drain timeout, remaining requests are cancelled rather than holding the exit.
        groupConfiguration.maximumGracefulShutdownDuration = configuration.server.drainTimeout
        return ServiceGroup(configuration: groupConfiguration)
    }
}

/// Flips the drain flag as soon as graceful shutdown begins.
struct DrainWatcher: Service {
    let state: DrainState
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        state.beginDraining()
        logger.info("draining: refusing new work, finishing in-flight requests")
    }
}
