public import Logging
public import NIOCore
public import RelaisClock
public import RelaisConfig
public import RelaisJOSE
public import RelaisServer
public import RelaisStore

/// Runs `relais serve`: the server skeleton (health, metrics, drain) with the relay's routes.
public enum RelayRunner {
    /// - Parameter reload: reads the configuration again on `SIGHUP` (``ConfigurationReloader``);
    ///   nil: no reload (tests running several relays in one process).
    /// - Parameter generateKey: makes the keys development generates; tests hand out pooled ones.
    public static func run(
        configuration: RelaisConfiguration,
        logger: Logger,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in },
        clock: any RelaisClock = SystemClock(),
        reload: (@Sendable () async throws -> RelaisConfiguration)? = nil,
        tracing: TracingBackend? = nil,
        generateKey: @escaping KeyGenerator = JWK.freshKey
    ) async throws {
        let keySync = RelayKeySync()
        try await ServerSkeleton.run(
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
            clock: clock,
            reload: reload,
            tracing: tracing,
            services: [keySync]
        ) { current, dependencies in
            if current.server.environment == .production, let warning = await persistenceWarning(dependencies.store) { logger.warning("\(warning)") }
            let relay = try await Relay(configuration: current, store: dependencies.store, httpClient: dependencies.httpClient, clock: clock, generateKey: generateKey)
            keySync.follow(relay)
            return relay.register(on:)
        }
    }

    /// Sessions live in Redis: without the append-only file, a Redis restart loses every session
    /// since its last RDB snapshot (all of them without one), and everyone must sign in again.
    public static func persistenceWarning(_ store: any KeyValueStore) async -> String? {
        let store = (store as? TracedStore)?.base ?? store
        guard let redis = store as? RedisStore, await redis.serverSetting("appendonly") == "no" else { return nil }
        let snapshots = await redis.serverSetting("save") ?? ""
        return "Redis runs without its append-only file (appendonly no)"
            + (snapshots.isEmpty
                ? " and without RDB snapshots: a Redis restart signs every user out"
                : ": a Redis restart loses the sessions opened since its last RDB snapshot (save \(snapshots))")
            + "; set appendonly yes (docs/operations.md)"
    }
}
