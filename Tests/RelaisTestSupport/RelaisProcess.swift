public import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The real `relais` binary running a server subcommand (`dev-provider` or `serve`) on a free
/// loopback port, configured from YAML text: what the provider, relay and Python tests talk to.
public final class RelaisProcess: Sendable {
    public let port: Int
    public let configPath: String
    public let logPath: String
    private let process: Mutex<ChildProcess?>
    private let environment: [String: String]
    private let subcommand: String

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// The process id while it runs.
    public var pid: pid_t? { process.withLock { $0?.pid } }

    /// The descriptors the process has open now (its sockets included); nil when it is not running.
    public var openDescriptors: Int? {
        guard let pid, let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return nil }
        return entries.count
    }

    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    public static let binary = packageRoot.appendingPathComponent(".build/debug/relais").path
    public static let identitiesFile = packageRoot.appendingPathComponent("config/dev-identities.yaml").path
    public static let proConnectIdentitiesFile = packageRoot.appendingPathComponent("config/dev-identities-proconnect.yaml").path

    private init(subcommand: String, port: Int, configPath: String, logPath: String, environment: [String: String]) {
        self.subcommand = subcommand
        self.port = port
        self.configPath = configPath
        self.logPath = logPath
        self.environment = environment
        process = Mutex(nil)
    }

    /// Starts `relais <subcommand> --config FILE`, the file written by `config` for the chosen port.
    public static func launch(
        _ subcommand: String,
        environment: [String: String] = [:],
        port: Int? = nil,
        config: (Int) -> String
    ) async throws -> RelaisProcess {
        let files = try TestServerFiles(subcommand, port: port, config: config)
        let instance = RelaisProcess(
            subcommand: subcommand, port: files.port, configPath: files.configPath, logPath: files.directory.appendingPathComponent("log").path,
            environment: environment
        )
        try await instance.start()
        return instance
    }

    /// Starts a development provider whose file holds `provider` (extra keys of the provider
    /// section) and `clients` (the clients section's entries), on embedded storage unless `store` says otherwise.
    public static func devProvider(
        mode: String = "v2",
        clients: String,
        provider: String = "",
        store: String = "  kind: embedded",
        environment: [String: String] = [:]
    ) async throws -> RelaisProcess {
        try await launch("dev-provider", environment: environment) { port in
            devProviderConfiguration(port: port, mode: mode, clients: clients, provider: provider, store: store)
        }
    }

    /// The YAML of a development provider on `port` (see ``devProvider(mode:clients:provider:store:environment:)``).
    public static func devProviderConfiguration(port: Int, mode: String, clients: String, provider: String, store: String = "  kind: embedded") -> String {
        """
        server:
          environment: development
          port: \(port)
        log:
          level: warning
        store:
        \(store)
        provider:
          mode: \(mode)
          identities_file: \(mode == "proconnect" ? proConnectIdentitiesFile : identitiesFile)
        \(provider)
        clients:
        \(clients)
        """
    }

    public func start() async throws {
        let child = try ChildProcess.spawn(Self.binary, [subcommand, "--config", configPath], environment: environment, standardOutput: logPath, standardError: logPath + ".err")
        process.withLock { $0 = child }
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if FreePort.isAccepting(port: port) { return }
            if child.hasExited() {
                process.withLock { $0 = nil }
                throw RelaisProcessError.exited(log: log)
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        stop()
        throw RelaisProcessError.didNotStart(port: port)
    }

    /// What the process wrote (startup problems first).
    public var log: String {
        ((try? String(contentsOfFile: logPath + ".err", encoding: .utf8)) ?? "") + ((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")
    }

    public func stop() {
        let child = process.withLock { current -> ChildProcess? in
            defer { current = nil }
            return current
        }
        child?.terminate(with: SIGKILL)
    }

    public func restart() async throws {
        stop()
        try await start()
    }

    deinit { stop() }
}

public enum RelaisProcessError: Error {
    case didNotStart(port: Int)
    case exited(log: String)
}
