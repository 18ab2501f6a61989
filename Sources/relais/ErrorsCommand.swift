import ArgumentParser
import RelaisRelay

/// `relais errors --markdown`: the error catalogue, generated from the error types (docs/errors.md).
struct ErrorsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "errors",
        abstract: "Print the catalogue of every error code Relais reports (docs/errors.md is this output)."
    )

    @Flag(help: "Markdown, as committed in docs/errors.md.")
    var markdown = false

    func run() async throws {
        guard markdown else { throw ValidationError("only --markdown is available") }
        print(ErrorCatalogue.markdown(), terminator: "")
    }
}
