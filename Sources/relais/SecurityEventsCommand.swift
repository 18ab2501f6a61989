import ArgumentParser
import RelaisRelay

/// `relais security-events --markdown`: the security event schema, generated from the code
/// (docs/security-events.md).
struct SecurityEventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "security-events",
        abstract: "Print the schema of the security events Relais writes (docs/security-events.md is this output)."
    )

    @Flag(help: "Markdown, as committed in docs/security-events.md.")
    var markdown = false

    func run() async throws {
        guard markdown else { throw ValidationError("only --markdown is available") }
        print(SecurityEventCatalogue.markdown(), terminator: "")
    }
}
