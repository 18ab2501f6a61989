public import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The real `relais dev-provider` binary on a free loopback port, configured from YAML text, for
/// tests that need a provider process (the relay's, the provider's own, the Python checks).
public final class DevProviderProcess: Sendable {
    public let port: Int
    public let configPath: String
    public let logPath: String
    private let process: Mutex<ChildProcess?>
    private let environment: [String: String]

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    public static let binary = packageRoot.appendingPathComponent(".build/debug/relais").path
    public static let identitiesFile = packageRoot.appendingPathComponent("config/dev-identities.yaml").path

    private init(port: Int, configPath: String, logPath: String, environment: [String: String]) {
        self.port = port
        self.configPath = configPath
        self.logPath = logPath
        self.environment = environment
        process = Mutex(nil)
    }

    /// Starts a provider whose file holds `provider` (extra keys of the provider section) and
    /// `clients` (the clients section's entries), on embedded storage unless `store` says otherwise.
    public static func launch(
        mode: String = "v2",
        clients: String,
        provider: String = "",
        store: String = "  kind: embedded",
        environment: [String: String] = [:]
    ) async throws -> DevProviderProcess {
        let port = try FreePort.find()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relais-dev-provider-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let config = """
            server:
              environment: development
              port: \(port)
            log:
              level: warning
            store:
            \(store)
            provider:
              mode: \(mode)
              identities_file: \(identitiesFile)
            \(provider)
            clients:
            \(clients)
            """
        let configPath = directory.appendingPathComponent("dev-provider.yaml").path
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        let instance = DevProviderProcess(port: port, configPath: configPath, logPath: directory.appendingPathComponent("log").path, environment: environment)
        try await instance.start()
        return instance
    }

    public func start() async throws {
        let child = try ChildProcess.spawn(Self.binary, ["dev-provider", "--config", configPath], environment: environment, standardOutput: logPath, standardError: logPath + ".err")
        process.withLock { $0 = child }
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if FreePort.isAccepting(port: port) { return }
            if child.hasExited() {
                process.withLock { $0 = nil }
                throw DevProviderProcessError.exited(log: log)
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        stop()
        throw DevProviderProcessError.didNotStart(port: port)
    }

    /// What the provider wrote to standard error (startup problems).
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

public enum DevProviderProcessError: Error {
    case didNotStart(port: Int)
    case exited(log: String)
}
