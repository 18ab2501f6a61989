import ArgumentParser
import RelaisRelay

/// `relais errors`: the error catalogue, generated from the error types; `--markdown` is
/// docs/errors.md, byte for byte.
struct ErrorsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "errors",
        abstract: "Print the catalogue of every error code Relais reports, as readable text.",
        discussion: "With --markdown, the Markdown committed as docs/errors.md (a test compares them)."
    )

    @Flag(help: "Markdown, as committed in docs/errors.md.")
    var markdown = false

    func run() async throws {
        let text = ErrorCatalogue.markdown()
        print(markdown ? text : PlainText.render(markdown: text), terminator: "")
    }
}
