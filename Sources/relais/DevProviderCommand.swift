import ArgumentParser
import Logging
import RelaisConfig
import RelaisDevProvider

/// `relais dev-provider`: the FranceConnect-like provider for laptops, the demo and the tests.
struct DevProviderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-provider",
        abstract: "Run a FranceConnect-compatible OpenID Provider for development and tests (never in production).",
        discussion: "DEV_PROVIDER_* environment variables override the file's keys (DEV_PROVIDER_SERVER_PORT=9000)."
    )

    @Option(name: .shortAndLong, help: "YAML configuration file (see config/dev-provider.yaml).")
    var config: String?

    @Flag(help: "Validate the configuration and the identities file, print a summary, and exit.")
    var check = false

    func run() async throws {
        let configuration: DevProviderConfiguration
        do {
            configuration = try await ConfigurationLoader.loadDevProvider(filePath: config, environment: currentEnvironment())
        } catch {
            printError(error.description)
            throw ExitCode(2)
        }
        let tracingEnvironment = try readTracingEnvironment(defaultServiceName: "relais-dev-provider")
        if check {
            let mode = configuration.provider.mode
            print(
                "\(config ?? "(defaults)"): OK (mode \(mode.rawValue), \(configuration.clients.count) client(s), \(configuration.identities.count) identities, issuer \(configuration.server.publicBaseURL)\(mode == .v1 ? "/api/v1" : "/api/v2"))"
            )
            return
        }
        bootstrapLogging(configuration.log)
        let logger = Logger(label: "relais.dev-provider")
        do {
            try await DevProviderRunner.run(configuration: configuration, logger: logger, tracing: try makeTracing(tracingEnvironment, logger: logger))
        } catch {
            logger.critical("development provider stopped on an error", metadata: ["error": "\(error)"])
            throw ExitCode(1)
        }
    }
}
