import Logging
import NIOCore
public import RelaisClock
import RelaisConfig
import RelaisDevProvider
import RelaisRelay
import Synchronization

/// A server the harness talks to over loopback HTTP: the real `relais` binary in a child process,
/// or the same program served by this test process.
public protocol TestServer: Sendable {
    var baseURL: String { get }
    /// The YAML file the server was configured from (edited by restart tests).
    var configPath: String { get }
    func stop()
    /// Stops the server and starts it again from its (possibly edited) file, on the same port.
    func restart() async throws
}

extension RelaisProcess: TestServer {}

/// `relais serve` or `relais dev-provider` run inside the test process, on a free loopback port,
/// from a YAML file loaded exactly as the binary loads it (with `environment` as the RELAIS_* or
/// DEV_PROVIDER_* overrides). No child process starts, so a test pays for no process start, no
/// executable load and no second copy of the provider's keys. Tests of what only a process shows
/// (its log, its /metrics, signals) keep using ``RelaisProcess``.
public final class InProcessServer: TestServer {
    public enum Program: Sendable { case relay, devProvider }

    public let port: Int
    public let configPath: String
    private let program: Program
    private let environment: [String: String]
    /// The program's clock and its embedded store's.
    private let clock: any RelaisClock
    private let running = Mutex<Task<Void, any Error>?>(nil)

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Logs go nowhere: the relay's log is tested on the real process.
    private static let logger = Logger(label: "relais-in-process") { _ in SwiftLogNoOpLogHandler() }

    private init(program: Program, port: Int, configPath: String, environment: [String: String], clock: any RelaisClock) {
        self.program = program
        self.clock = clock
        self.port = port
        self.configPath = configPath
        self.environment = environment
    }

    public static func launch(
        _ program: Program, environment: [String: String] = [:], port: Int? = nil, clock: any RelaisClock = SystemClock(), config: (Int) -> String
    ) async throws -> InProcessServer {
        let files = try TestServerFiles("in-process", port: port, config: config)
        let server = InProcessServer(program: program, port: files.port, configPath: files.configPath, environment: environment, clock: clock)
        try await server.startWhenThePortIsFree()
        return server
    }

    public func start() async throws {
        try FastTests.refuse("serves \(program) over loopback")
        let (started, signal) = AsyncStream.makeStream(of: Void.self)
        let onServerRunning: @Sendable (any Channel) async -> Void = { _ in signal.yield() }
        let task = Task { [program, configPath, environment, clock] in
            defer { signal.finish() }
            switch program {
            case .relay:
                let generateKey = TestKeys.generator()
                let configuration = try await ConfigurationLoader.load(filePath: configPath, environment: environment, generateKey: generateKey)
                try await RelayRunner.run(
                    configuration: configuration, logger: Self.logger, onServerRunning: onServerRunning, clock: clock, generateKey: generateKey)
            case .devProvider:
                let configuration = try await ConfigurationLoader.loadDevProvider(filePath: configPath, environment: environment)
                try await DevProviderRunner.run(
                    configuration: configuration, logger: Self.logger, onServerRunning: onServerRunning, clock: clock, generateKey: TestKeys.generator()
                )
            }
        }
        running.withLock { $0 = task }
        var iterator = started.makeAsyncIterator()
        guard await iterator.next() != nil else {
            try await task.value  // it stopped before listening: its error says why
            throw InProcessServerError.stoppedBeforeListening
        }
    }

    public func stop() {
        running.withLock { $0 }?.cancel()
    }

    public func restart() async throws {
        let task = running.withLock { $0 }
        task?.cancel()
        _ = await task?.result
        try await startWhenThePortIsFree()
    }

    /// Starts, waiting up to 10 s for the port: this server's own stopped listener may close its
    /// socket a moment after its task ends. No other test holds the port (``FreePort`` reserves it).
    private func startWhenThePortIsFree() async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            do {
                return try await start()
            } catch  where "\(error)".contains("Address already in use") && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    deinit { stop() }
}

public enum InProcessServerError: Error {
    case stoppedBeforeListening
}
