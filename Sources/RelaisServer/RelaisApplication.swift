public import Hummingbird
public import Logging
public import NIOCore
import NIOPosix
public import RelaisClock
public import RelaisConfig
public import RelaisHTTPClient
public import RelaisStore
public import Tracing

/// The long-lived pieces a Relais instance shares between requests.
public struct RelaisDependencies: Sendable {
    public var store: any KeyValueStore
    public var httpClient: HTTPClient
    public var drainState: DrainState
    /// Set when traces are on: requests get a server span (``TraceMiddleware``); the store and the
    /// client built by ``make(for:logger:clock:tracer:)`` trace their calls.
    public var tracer: (any Tracer)?

    public init(store: any KeyValueStore, httpClient: HTTPClient, drainState: DrainState = DrainState(), tracer: (any Tracer)? = nil) {
        self.store = store
        self.httpClient = httpClient
        self.drainState = drainState
        self.tracer = tracer
    }

    /// Builds the store the configuration names and the outbound HTTP client. `clock` counts the
    /// embedded store's TTLs (Redis counts its own).
    public static func make(
        for configuration: RelaisConfiguration, logger: Logger, clock: any RelaisClock = SystemClock(), tracer: (any Tracer)? = nil
    ) -> RelaisDependencies {
        var store: any KeyValueStore =
            switch configuration.store.kind {
            case .redis: RedisStore(configuration: configuration.store.redis, logger: logger)
            case .embedded: EmbeddedStore(clock: clock)
            }
        if let tracer { store = TracedStore(store, tracer: tracer, system: configuration.store.kind == .redis ? "redis" : "relais.embedded") }
        return RelaisDependencies(
            store: store,
            // The loops that serve the requests make and read the providers' connections too.
            httpClient: HTTPClient(configuration: configuration.httpClient, logger: logger, tracer: tracer, eventLoopGroup: .singleton),
            tracer: tracer
        )
    }

    public func shutdown() async {
        try? await httpClient.shutdown()
        try? await store.shutdown()
    }
}

/// Assembles the Hummingbird application: middleware in a fixed order, then the routes.
public enum RelaisApplication {
    public static func makeRouter(
        configuration: RelaisConfiguration,
        dependencies: RelaisDependencies,
        additionalRoutes: (Router<RelaisRequestContext>) -> Void = { _ in }
    ) -> Router<RelaisRequestContext> {
        let router = Router(context: RelaisRequestContext.self)
        // Outermost first: the id exists before anything logs; logging and metrics see the final
        // status because errors are rendered inside them; the body limit applies before any handler.
        router.middlewares.add(RequestIDMiddleware())
        if let tracer = dependencies.tracer {
            router.middlewares.add(TraceMiddleware(tracer: tracer, trustedProxies: configuration.server.trustedProxies.compactMap(IPNetwork.init)))
        }
        router.middlewares.add(RequestLogMiddleware())
        if configuration.metrics.enabled { router.middlewares.add(MetricsMiddleware()) }
        router.middlewares.add(RetryAfterMiddleware())
        router.middlewares.add(ErrorMiddleware())
        router.middlewares.add(BodyLimitMiddleware(maxBytes: configuration.server.maxBodyBytes))
        router.middlewares.add(StoreBudgetMiddleware(budget: configuration.store.requestBudget))

        HealthRoutes(store: dependencies.store, drainState: dependencies.drainState).register(on: router)
        if configuration.metrics.enabled {
            RelaisMetrics.bootstrap()
            // On the public port unless metrics.listen gives them a listener of their own.
            if configuration.metrics.listenPort == nil { MetricsRoute(bearerToken: configuration.metrics.bearerToken).register(on: router) }
        }
        additionalRoutes(router)
        router.middlewares.add(MethodNotAllowedMiddleware(routes: router.routes))  // last: around the not-found answer only
        return router
    }

    /// `/metrics` alone, on `metrics.listen` (nil when metrics share the public port or are off).
    static func makeMetricsApplication(configuration: RelaisConfiguration, logger: Logger) -> (some ApplicationProtocol)? {
        guard configuration.metrics.enabled, let host = configuration.metrics.listenHost, let port = configuration.metrics.listenPort else {
            return nil as Application<RouterResponder<BasicRequestContext>>?
        }
        let router = Router()
        MetricsRoute(bearerToken: configuration.metrics.bearerToken).register(on: router)
        return Application(router: router, configuration: .init(address: .hostname(host, port: port), serverName: "Relais metrics"), logger: logger)
    }

    public static func makeApplication(
        configuration: RelaisConfiguration,
        dependencies: RelaisDependencies,
        logger: Logger,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in },
        additionalRoutes: (Router<RelaisRequestContext>) -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = makeRouter(configuration: configuration, dependencies: dependencies, additionalRoutes: additionalRoutes)
        return makeApplication(configuration: configuration, responder: SwappableResponder(router.buildResponder()), logger: logger, onServerRunning: onServerRunning)
    }

    /// The application around a responder that a reload may replace (``SwappableResponder``).
    public static func makeApplication(
        configuration: RelaisConfiguration,
        responder: SwappableResponder,
        logger: Logger,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let limit = ConnectionLimit(maximum: configuration.server.maxConnections ?? ConnectionLimit.defaultMaximum())
        let (headerTimeout, idleTimeout) = (TimeAmount(configuration.server.headerTimeout), TimeAmount(configuration.server.idleTimeout))
        return Application(
            responder: responder,
            server: .http1OnEventLoops(
                configuration: .init(additionalChannelHandlers: [
                    ConnectionLimitHandler(limit: limit), ConnectionDeadlineHandler(headerTimeout: headerTimeout, idleTimeout: idleTimeout),
                ])
            ),
            configuration: .init(
                address: .hostname(configuration.server.host, port: configuration.server.port),
                serverName: "Relais",
                // Connections the kernel queues while the event loops accept: a burst (a load balancer
                // reconnecting, or a flood of idle clients) waits in it instead of being dropped.
                backlog: 4096
            ),
            onServerRunning: onServerRunning,
            logger: logger
        )
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
