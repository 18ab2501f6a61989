public import Hummingbird
public import Logging
public import NIOCore
public import RelaisClock
public import RelaisConfig
public import ServiceLifecycle
public import UnixSignals

/// The server skeleton's lifecycle: until SIGTERM or SIGINT, then a drain: /readyz turns 503, the
/// listener closes, in-flight requests get up to `server.drain_timeout` to finish. The programs
/// (`RelayRunner`, `DevProviderRunner`) close the store and the outbound client last.
public enum ServerSkeleton {
    /// Runs a program on the server skeleton: its dependencies, its routes (built once the store is
    /// up, e.g. keys loaded from it), until SIGTERM or SIGINT; then the drain, and the store and the
    /// outbound client closed last. `name` starts the start and stop log lines.
    public static func run(
        configuration: RelaisConfiguration,
        logger: Logger,
        name: String,
        startLevel: Logger.Level = .info,
        metadata: Logger.Metadata,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in },
        clock: any RelaisClock = SystemClock(),
        reload: (@Sendable () async throws -> RelaisConfiguration)? = nil,
        tracing: TracingBackend? = nil,
        services: [any Service] = [],
        routes: @escaping ConfigurationReloader.Routes
    ) async throws {
        let dependencies = RelaisDependencies.make(for: configuration, logger: logger, clock: clock, tracer: tracing?.tracer)
        let register: (Router<RelaisRequestContext>) -> Void
        do {
            register = try await routes(configuration, dependencies)
        } catch {
            await dependencies.shutdown()
            throw error
        }
        let responder = SwappableResponder(
            RelaisApplication.makeRouter(configuration: configuration, dependencies: dependencies, additionalRoutes: register).buildResponder()
        )
        let reloader = reload.map {
            ConfigurationReloader(running: configuration, load: $0, routes: routes, dependencies: dependencies, responder: responder, logger: logger)
        }
        let group = makeServiceGroup(
            configuration: configuration, dependencies: dependencies, logger: logger, signals: [.sigterm, .sigint],
            onServerRunning: onServerRunning, responder: responder, reloader: reloader, tracing: tracing?.service, services: services
        )
        var startMetadata = metadata
        startMetadata["address"] = "\(configuration.server.host):\(configuration.server.port)"
        startMetadata["store"] = "\(configuration.store.kind.rawValue)"
        logger.log(level: startLevel, "\(name) starting", metadata: startMetadata)
        for warning in configuration.warnings { logger.warning("\(warning)") }
        do {
            try await group.run()
        } catch {
            await dependencies.shutdown()
            throw error
        }
        await dependencies.shutdown()
        logger.info("\(name) stopped")
    }

    /// The server and the drain watcher as one service group; graceful shutdown starts on the given
    /// signals or on `triggerGracefulShutdown()`.
    public static func makeServiceGroup(
        configuration: RelaisConfiguration,
        dependencies: RelaisDependencies,
        logger: Logger,
        signals: [UnixSignal],
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in },
        additionalRoutes: (Router<RelaisRequestContext>) -> Void = { _ in },
        responder: SwappableResponder? = nil,
        reloader: ConfigurationReloader? = nil,
        tracing: (any Service)? = nil,
        services programServices: [any Service] = []
    ) -> ServiceGroup {
        let application = RelaisApplication.makeApplication(
            configuration: configuration,
            responder: responder
                ?? SwappableResponder(
                    RelaisApplication.makeRouter(configuration: configuration, dependencies: dependencies, additionalRoutes: additionalRoutes).buildResponder()
                ),
            logger: logger,
            onServerRunning: onServerRunning
        )
        // The span exporter first: graceful shutdown goes in reverse order, so it flushes last.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = tracing.map { [.init(service: $0)] } ?? []
        let address = "\(configuration.server.host):\(configuration.server.port)"
        services.append(.init(service: ListeningService(base: application, address: address, advice: "Stop it, or choose another port (server.port)")))
        if let reloader { services.append(.init(service: ReloadService(reloader: reloader))) }
        services.append(.init(service: MemoryReturner()))
        services += programServices.map { .init(service: $0) }
        if let metrics = RelaisApplication.makeMetricsApplication(configuration: configuration, logger: logger) {
            let address = "\(configuration.metrics.listenHost ?? ""):\(configuration.metrics.listenPort.map(String.init) ?? "")"
            services.append(.init(service: ListeningService(base: metrics, address: address, advice: "This is the metrics listener: give metrics.listen an address of its own")))
        }
        var groupConfiguration = ServiceGroupConfiguration(
            // Graceful shutdown reaches services in reverse order: the drain flag flips first, then
            // the server stops accepting and waits for in-flight requests.
            services: services + [.init(service: DrainWatcher(state: dependencies.drainState, logger: logger))],
            gracefulShutdownSignals: signals,
            cancellationSignals: [],
            logger: logger
        )
        // Past the drain timeout, remaining requests are cancelled rather than holding the exit.
        groupConfiguration.maximumGracefulShutdownDuration = configuration.server.drainTimeout
        return ServiceGroup(configuration: groupConfiguration)
    }
}

/// Flips the drain flag as soon as graceful shutdown begins. When the group is cancelled instead
/// (a service failed, e.g. the port was taken), nothing was serving: no drain to announce.
struct DrainWatcher: Service {
    let state: DrainState
    let logger: Logger

    func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            state.beginDraining()
            return
        }
        state.beginDraining()
        logger.info("draining: refusing new work, finishing in-flight requests")
    }
}
