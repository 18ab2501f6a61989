import ArgumentParser
import FoundationEssentials
import Logging
import RelaisConfig
import RelaisRelay
import RelaisServer
import RelaisStore

/// `relais sessions list|revoke --sub …`: the operator's view of a person's sessions, and the way
/// to sign them out everywhere (a lost phone, a compromised account). After a revocation, access
/// tokens stop working wherever sessions are checked (userinfo, introspection, session-checked
/// forward-auth); refresh tokens at once.
struct SessionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sessions",
        abstract: "Manage Relais sessions in the store (Redis; an embedded store is refused).",
        discussion:
            "Exit codes: 0 done (the count is printed); 1 the store cannot be reached; 2 invalid configuration, an embedded store (only the server that opened it sees its sessions) or an unknown --provider.",
        subcommands: [List.self, Revoke.self]
    )

    /// What both subcommands take: the configuration, whose sessions, and at which providers.
    struct SubjectOptions: ParsableArguments {
        @OptionGroup var options: ConfigOptions

        @Option(help: "The user's `sub`, as in Relais tokens.")
        var sub: String

        @Option(help: "Only sessions opened through this provider id (default: every configured provider).")
        var provider: String?

        /// Runs `body` once per provider against the configured store, then closes it. Exit 2 for
        /// an invalid configuration, an embedded store (only its own server sees its sessions) or an
        /// unknown `--provider`, 1 when the store fails (`verb` names the action in the message).
        func forEachProvider(_ verb: String, _ body: (_ provider: String, _ store: any KeyValueStore) async throws -> Void) async throws {
            let configuration = try await options.load()
            // An embedded store lives in the memory of the `relais serve` that opened it: this
            // process would open an empty one of its own and answer "0" for sessions that exist.
            if configuration.store.kind == .embedded {
                printError(
                    "cannot \(verb) sessions: the store is embedded (store.kind: embedded), so its sessions live inside the running `relais serve` process and no other process can see them."
                        + " Use a Redis store (store.kind: redis); to end a person's sessions on an embedded store, POST /admin/sessions/revoke to the running server (enabled by admin.token_file)."
                )
                throw ExitCode(2)
            }
            let known = configuration.providers.map(\.id)
            if let provider, !known.contains(provider) {
                printError("unknown provider '\(provider)' (configured: \(known.joined(separator: ", ")))")
                throw ExitCode(2)
            }
            var logger = Logger(label: "relais.sessions")
            logger.logLevel = .error
            let dependencies = RelaisDependencies.make(for: configuration, logger: logger)
            do {
                for id in provider.map({ [$0] }) ?? known { try await body(id, dependencies.store) }
                await dependencies.shutdown()
            } catch {
                await dependencies.shutdown()
                printError("cannot \(verb): \(error)")
                throw ExitCode(1)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a user's live sessions (all apps): which app, since when, until when. Never identity claims or tokens.")

        @OptionGroup var subject: SubjectOptions

        func run() async throws {
            var sessions: [SessionAdministration.Summary] = []
            try await subject.forEachProvider("list") { provider, store in
                sessions += try await SessionAdministration.list(subject: subject.sub, provider: provider, store: store)
            }
            for session in sessions {
                print(
                    "\(session.sid)  client=\(session.clientID)  provider=\(session.providerID)  acr=\(session.acr ?? "-")"
                        + "  since=\(Self.timestamp(session.createdAt))  ends=\(Self.timestamp(session.endsAt))"
                        + "  idle_expires_in=\(session.idleRemaining.components.seconds)s"
                )
            }
            print("\(sessions.count) live session(s)")
        }

        static func timestamp(_ seconds: Double) -> String {
            Date(timeIntervalSince1970: seconds.rounded(.down)).formatted(.iso8601)
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "End every session of a user (all apps).")

        @OptionGroup var subject: SubjectOptions

        func run() async throws {
            var total = 0
            try await subject.forEachProvider("revoke") { provider, store in
                total += try await SessionAdministration.revokeAll(subject: subject.sub, provider: provider, store: store)
            }
            print("revoked \(total) session(s)")
        }
    }
}
