import RelaisTestSupport
import Testing

/// Reads the code of a DocC article and the snippets of a test file, so that a test can prove
/// the article shows code that compiles and runs.
///
/// A snippet is the text between a line `// snippet: NAME` and a line `// end-snippet`; a block
/// is the text between a line ```` ```swift ```` and the next line ```` ``` ````. Both are
/// compared normalised: trailing spaces trimmed, leading and trailing blank lines dropped, and
/// the indentation common to all non-blank lines removed.
enum DocumentationSnippets {
    struct Snippet: Equatable {
        var name: String
        var text: String
    }

    static func swiftBlocks(in markdown: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = trimmingTrailingSpaces(line.drop { $0 == " " || $0 == "\t" })
            if current == nil, trimmed == "```swift" {
                current = []
            } else if let lines = current, trimmed == "```" {
                blocks.append(normalised(lines))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    static func snippets(in source: String) -> [Snippet] {
        var snippets: [Snippet] = []
        var current: (name: String, lines: [Substring])?
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = trimmingTrailingSpaces(line.drop { $0 == " " || $0 == "\t" })
            if current == nil, trimmed.hasPrefix("// snippet: ") {
                current = (String(trimmed.dropFirst("// snippet: ".count)), [])
            } else if let open = current, trimmed == "// end-snippet" {
                snippets.append(Snippet(name: open.name, text: normalised(open.lines)))
                current = nil
            } else {
                current?.lines.append(line)
            }
        }
        return snippets
    }

    static func trimmingTrailingSpaces(_ line: Substring) -> String {
        var line = line
        while let last = line.last, last == " " || last == "\t" || last == "\r" { line.removeLast() }
        return String(line)
    }

    static func normalised(_ lines: [Substring]) -> String {
        var lines = lines.map { trimmingTrailingSpaces($0) }
        while lines.first?.isEmpty == true { lines.removeFirst() }
        while lines.last?.isEmpty == true { lines.removeLast() }
        let indentation = lines.filter { !$0.isEmpty }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
        return lines.map { $0.isEmpty ? $0 : String($0.dropFirst(indentation)) }.joined(separator: "\n")
    }
}

@Suite(.tags(.fast)) struct DocumentationSnippetsTests {
    @Test func blocksAndSnippetsAreComparedWithoutTheirIndentationAndTrailingSpaces() {
        let markdown = "Text\n\n```swift\n    let a = 1  \n\n      let b = 2\n```\n\n```json\n{}\n```\n"
        let source = "x\n    // snippet: one\n\n    let a = 1\n\n      let b = 2\n    // end-snippet\n"
        #expect(DocumentationSnippets.swiftBlocks(in: markdown) == ["let a = 1\n\n  let b = 2"])
        #expect(DocumentationSnippets.snippets(in: source) == [.init(name: "one", text: "let a = 1\n\n  let b = 2")])
    }
}
