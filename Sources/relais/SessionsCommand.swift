import ArgumentParser
import FoundationEssentials
import Logging
import RelaisConfig
import RelaisRelay
import RelaisServer

/// `relais sessions revoke --sub …`: the operator's way to sign someone out everywhere (a lost
/// phone, a compromised account). Access tokens stop working wherever sessions are checked
/// (userinfo, introspection, session-checked forward-auth); refresh tokens at once.
struct SessionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "sessions", abstract: "Manage Relais sessions in the store.", subcommands: [List.self, Revoke.self])

    /// The providers to look at: `--provider`, or every configured one; nil (after an error
    /// message) for an unknown id.
    static func providers(_ provider: String?, in configuration: RelaisConfiguration) -> [String]? {
        guard let provider else { return configuration.providers.map(\.id) }
        guard configuration.providers.contains(where: { $0.id == provider }) else {
            printError("unknown provider '\(provider)' (configured: \(configuration.providers.map(\.id).joined(separator: ", ")))")
            return nil
        }
        return [provider]
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a user's live sessions (all apps): which app, since when, until when. Never identity claims or tokens.")

        @OptionGroup var options: ConfigOptions

        @Option(help: "The user's `sub`, as in Relais tokens.")
        var sub: String

        @Option(help: "Only sessions opened through this provider id (default: every configured provider).")
        var provider: String?

        func run() async throws {
            let configuration = try await options.load()
            guard let providers = SessionsCommand.providers(provider, in: configuration) else { throw ExitCode(2) }
            var logger = Logger(label: "relais.sessions")
            logger.logLevel = .error
            let dependencies = RelaisDependencies.make(for: configuration, logger: logger)
            do {
                var sessions: [SessionAdministration.Summary] = []
                for provider in providers {
                    sessions += try await SessionAdministration.list(subject: sub, provider: provider, store: dependencies.store)
                }
                await dependencies.shutdown()
                for session in sessions {
                    print(
                        "\(session.sid)  client=\(session.clientID)  provider=\(session.providerID)  acr=\(session.acr ?? "-")"
                            + "  since=\(Self.timestamp(session.createdAt))  ends=\(Self.timestamp(session.endsAt))"
                            + "  idle_expires_in=\(session.idleRemaining.components.seconds)s"
                    )
                }
                print("\(sessions.count) live session(s)")
            } catch {
                await dependencies.shutdown()
                printError("cannot list: \(error)")
                throw ExitCode(1)
            }
        }

        static func timestamp(_ seconds: Double) -> String {
            Date(timeIntervalSince1970: seconds.rounded(.down)).formatted(.iso8601)
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "End every session of a user (all apps).")

        @OptionGroup var options: ConfigOptions

        @Option(help: "The user's `sub`, as in Relais tokens.")
        var sub: String

        @Option(help: "Only sessions opened through this provider id (default: every configured provider).")
        var provider: String?

        func run() async throws {
            let configuration = try await options.load()
            guard let providers = SessionsCommand.providers(provider, in: configuration) else { throw ExitCode(2) }
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
