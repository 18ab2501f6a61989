public import Hummingbird
public import Logging
import Metrics
public import RelaisConfig
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Live reload (`SIGHUP`, or `relais reload`): reads the configuration again and, when it is
/// valid, builds a new router from it and swaps it in. A configuration that `check-config` would
/// refuse changes nothing: the problems are logged and counted, and the running one stays.
public final class ConfigurationReloader: Sendable {
    public enum Outcome: Sendable, Equatable {
        case applied(needsRestart: [String])
        case refused(String)
    }

    /// Builds the routes of a configuration on the running dependencies.
    public typealias Routes = @Sendable (RelaisConfiguration, RelaisDependencies) async throws -> (Router<RelaisRequestContext>) -> Void

    private let load: @Sendable () async throws -> RelaisConfiguration
    private let routes: Routes
    private let dependencies: RelaisDependencies
    private let responder: SwappableResponder
    private let logger: Logger
    private let running: Mutex<RelaisConfiguration>

    public init(
        running configuration: RelaisConfiguration, load: @escaping @Sendable () async throws -> RelaisConfiguration, routes: @escaping Routes,
        dependencies: RelaisDependencies, responder: SwappableResponder, logger: Logger
    ) {
        self.load = load
        self.routes = routes
        self.dependencies = dependencies
        self.responder = responder
        self.logger = logger
        running = Mutex(configuration)
    }

    public var configuration: RelaisConfiguration { running.withLock { $0 } }

    /// Reads, checks and applies the configuration. Call it from one task at a time (the
    /// ``ReloadService`` loop takes signals one after the other), so reloads apply in order.
    @discardableResult
    public func reload() async -> Outcome {
        let outcome = await attempt()
        switch outcome {
        case .applied(let needsRestart):
            Counter(label: "relais_config_reloads_total", dimensions: [("outcome", "applied")]).increment()
            var metadata: Logger.Metadata = [:]
            if !needsRestart.isEmpty { metadata["needs_restart"] = "\(needsRestart.joined(separator: ","))" }
            logger.info("configuration reloaded", metadata: metadata)
            if !needsRestart.isEmpty {
                logger.warning("changes to these sections take effect at the next restart; the running values stay", metadata: metadata)
            }
        case .refused(let problems):
            Counter(label: "relais_config_reloads_total", dimensions: [("outcome", "refused")]).increment()
            logger.error("configuration reload refused; the running configuration stays", metadata: ["problems": "\(problems)"])
        }
        return outcome
    }

    private func attempt() async -> Outcome {
        let newer: RelaisConfiguration
        do {
            newer = try await load()
        } catch {
            return .refused("\(error)")
        }
        if let problem = configuration.reloadRefusal(of: newer) { return .refused("\(problem)") }
        let (merged, needsRestart) = configuration.reloaded(with: newer)
        do {
            let register = try await routes(merged, dependencies)
            let router = RelaisApplication.makeRouter(configuration: merged, dependencies: dependencies, additionalRoutes: register)
            responder.replace(with: router.buildResponder())
        } catch {
            return .refused("\(error)")
        }
        running.withLock { $0 = merged }
        for warning in newer.warnings { logger.warning("\(warning)") }
        return .applied(needsRestart: needsRestart)
    }
}

/// Reloads on each `SIGHUP` until graceful shutdown.
struct ReloadService: Service {
    let reloader: ConfigurationReloader

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        await withGracefulShutdownHandler {
            for await _ in signals.cancelOnGracefulShutdown() { await reloader.reload() }
        } onGracefulShutdown: {
        }
    }
}
