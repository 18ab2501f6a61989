import ArgumentParser
import Logging
import RelaisConfig
import RelaisRelay
import RelaisServer

/// `relais sessions revoke --sub …`: the operator's way to sign someone out everywhere (a lost
/// phone, a compromised account). Access tokens stop working wherever sessions are checked
/// (userinfo, introspection, session-checked forward-auth); refresh tokens at once.
struct SessionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "sessions", abstract: "Manage Relais sessions in the store.", subcommands: [Revoke.self])

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "End every session of a user (all apps).")

        @OptionGroup var options: ConfigOptions

        @Option(help: "The user's `sub`, as in Relais tokens.")
        var sub: String

        @Option(help: "Only sessions opened through this provider id (default: every configured provider).")
        var provider: String?

        func run() async throws {
            let configuration = try await options.load()
            let providers = provider.map { [$0] } ?? configuration.providers.map(\.id)
            if let provider, !configuration.providers.contains(where: { $0.id == provider }) {
                printError("unknown provider '\(provider)' (configured: \(configuration.providers.map(\.id).joined(separator: ", ")))")
                throw ExitCode(2)
            }
            var logger = Logger(label: "relais.sessions")
            logger.logLevel = .error
            let dependencies = RelaisDependencies.make(for: configuration, logger: logger)
            do {
                var total = 0
                for provider in providers {
                    total += try await SessionAdministration.revokeAll(subject: sub, provider: provider, store: dependencies.store)
                }
                await dependencies.shutdown()
                print("revoked \(total) session(s)")
            } catch {
                await dependencies.shutdown()
                printError("cannot revoke: \(error)")
                throw ExitCode(1)
            }
        }
    }
}
