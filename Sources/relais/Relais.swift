import ArgumentParser
import FoundationEssentials
import Logging
import RelaisConfig
import RelaisOIDC
import RelaisRelay
import RelaisServer
import RelaisStore
import RelaisTelemetry

#if canImport(Glibc)
import Glibc
#endif

@main
struct Relais: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relais",
        abstract: "A backend-for-frontend relay: mobile apps sign in with FranceConnect and other OpenID providers without holding a provider secret or token.",
        version: "relais " + RelaisVersion.description,
        subcommands: [
            Serve.self, CheckConfig.self, JWTCommand.self, AttestCommand.self, DevProviderCommand.self, SessionsCommand.self, ReloadCommand.self, ErrorsCommand.self,
            SecurityEventsCommand.self,
        ]
    )
}

struct ConfigOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "YAML configuration file. RELAIS_* environment variables override its keys.")
    var config: String?

    func load() async throws -> RelaisConfiguration {
        do {
            return try await ConfigurationLoader.load(filePath: config, environment: currentEnvironment())
        } catch {
            printError(error.description)
            throw ExitCode(2)
        }
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the relay until SIGTERM or SIGINT, then drain.",
        discussion:
            "Without providers or apps (no --config), it says so and serves only health, metrics and discovery. Exit codes: 0 stopped by SIGTERM or SIGINT; 1 could not listen (the address is in use, for example) or stopped on a runtime error; 2 invalid configuration."
    )

    @OptionGroup var options: ConfigOptions

    @Option(help: "Write the process id to this file, for `relais reload --pid-file`.")
    var pidFile: String?

    func run() async throws {
        let configuration = try await options.load()
        let tracingEnvironment = try readTracingEnvironment(defaultServiceName: "relais")
        bootstrapLogging(configuration.log)
        let logger = Logger(label: "relais")
        if let pidFile {
            do { try "\(getpid())\n".write(toFile: pidFile, atomically: true, encoding: .utf8) } catch {
                printError("cannot write --pid-file \(pidFile): \(error)")
                throw ExitCode(2)
            }
        }
        if let notice = Self.emptinessNotice(configuration, file: options.config) { logger.warning("\(notice)") }
        // SIGHUP reads the same file and environment again (docs/operations.md, "Live reload").
        let path = options.config
        do {
            try await RelayRunner.run(
                configuration: configuration, logger: logger, reload: { try await ConfigurationLoader.load(filePath: path, environment: currentEnvironment()) },
                tracing: try makeTracing(tracingEnvironment, logger: logger)
            )
        } catch let error as ListenError {
            logger.critical("relais could not start: \(error)")
            throw ExitCode(1)
        } catch {
            logger.critical("relais stopped on an error", metadata: ["error": "\(error)"])
            throw ExitCode(1)
        }
    }

    /// What a relay without providers or apps does, said before it starts: it answers health,
    /// metrics and discovery, and nobody can sign in through it.
    static func emptinessNotice(_ configuration: RelaisConfiguration, file: String?) -> String? {
        var missing: [String] = []
        if configuration.providers.isEmpty { missing.append("no provider") }
        if configuration.apps.isEmpty { missing.append("no app") }
        guard !missing.isEmpty else { return nil }
        let source = file.map { "\($0) and the RELAIS_* environment configure" } ?? "no --config file given, and the RELAIS_* environment configures"
        return "\(source) \(missing.joined(separator: " and ")): relais serves its health, metrics and discovery endpoints only, and nobody can sign in through it."
            + " Name providers and apps in a configuration file (config/relais.example.yaml is one) and pass it with --config."
    }
}

struct CheckConfig: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a configuration file (with the current RELAIS_* environment) and print every problem."
    )

    @Argument(help: "The YAML configuration file to check.")
    var file: String

    @Flag(
        help:
            "Also reach what the file names, as `serve` would: the store (a PING, through TLS or Sentinel when configured) and each provider's metadata and signing keys. Exit 1 if any cannot be reached."
    )
    var probe = false

    func run() async throws {
        let configuration: RelaisConfiguration
        do {
            configuration = try await ConfigurationLoader.load(filePath: file, environment: currentEnvironment())
            print(
                "\(file): OK (store: \(configuration.store.kind.rawValue), listening on \(configuration.server.host):\(configuration.server.port), public URL \(configuration.server.publicBaseURL))"
            )
            for warning in configuration.warnings { print("warning: \(warning)") }
        } catch {
            // 2, as `serve` refuses the same file: scripts and images tell "refused" from "unreachable" (1).
            printError(error.description)
            throw ExitCode(2)
        }
        let tracing = try readTracingEnvironment(defaultServiceName: "relais")
        print(tracing.map { "traces: OTLP/HTTP to \($0.endpointForDisplay), service \($0.serviceName), sampler \($0.sampler)" } ?? "traces: off (OTEL_TRACES_EXPORTER is not otlp)")
        if probe, !(await Self.probe(configuration)) { throw ExitCode(1) }
    }

    /// One line per dependency, `OK` or `FAILED` with the reason; true when all answered.
    static func probe(_ configuration: RelaisConfiguration) async -> Bool {
        var logger = Logger(label: "relais.probe")
        logger.logLevel = .critical  // the lines below say everything; no secrets either way
        let dependencies = RelaisDependencies.make(for: configuration, logger: logger)
        var allReachable = true
        let storeName = configuration.store.kind == .embedded ? "store (embedded)" : "store (redis)"
        do {
            try await dependencies.store.ping()
            print("\(storeName): OK")
        } catch {
            print("\(storeName): FAILED: \(error)")
            allReachable = false
        }
        for settings in configuration.providers {
            let provider = UpstreamProvider(settings: settings, http: dependencies.httpClient)
            do {
                print("provider \(settings.id) (\(settings.issuer)): OK: \(try await provider.probe())")
            } catch {
                print("provider \(settings.id) (\(settings.issuer)): FAILED: \(error.description)")
                allReachable = false
            }
        }
        await dependencies.shutdown()
        return allReachable
    }
}

func bootstrapLogging(_ log: RelaisConfiguration.Log) {
    let format: LineLogHandler.Format = log.format == .json ? .json : .text
    LoggingSystem.bootstrap { label in LineLogHandler(label: label, level: log.level, format: format) }
}

func currentEnvironment() -> [String: String] {
    var result: [String: String] = [:]
    var pointer = environ
    while let entry = pointer.pointee {
        let text = String(cString: entry)
        if let equals = text.firstIndex(of: "=") {
            result[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
        pointer += 1
    }
    return result
}

func printError(_ message: String) {
    var line = message + "\n"
    line.withUTF8 { buffer in _ = write(STDERR_FILENO, buffer.baseAddress, buffer.count) }
}
