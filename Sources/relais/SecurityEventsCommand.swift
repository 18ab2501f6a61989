import ArgumentParser
import RelaisRelay

/// `relais security-events`: the security event schema, generated from the code; `--markdown`
/// is docs/security-events.md, byte for byte.
struct SecurityEventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "security-events",
        abstract: "Print the schema of the security events Relais writes, as readable text.",
        discussion: "With --markdown, the Markdown committed as docs/security-events.md (a test compares them)."
    )

    @Flag(help: "Markdown, as committed in docs/security-events.md.")
    var markdown = false

    func run() async throws {
        let text = SecurityEventCatalogue.markdown()
        print(markdown ? text : PlainText.render(markdown: text), terminator: "")
    }
}
