/// The generated catalogues (docs/errors.md, docs/security-events.md) for a terminal: the same
/// text as `--markdown`, without its markup. Headings are underlined, each table row becomes a
/// block (its first cell, then `column: value` lines), code spans lose their backticks and links
/// show their address. Only the Markdown those generators write is handled.
enum PlainText {
    static func render(markdown: String, width: Int = 100) -> String {
        var output: [String] = []
        var header: [String]?
        var inFence = false
        var inComment = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if inComment {
                if line.contains("-->") { inComment = false }
                continue
            }
            if line.hasPrefix("<!--") {
                inComment = !line.contains("-->")
                continue
            }
            if line.hasPrefix("```") {
                inFence.toggle()
                continue
            }
            if inFence {
                output.append("    " + line)
                continue
            }
            if line.hasPrefix("|") {
                let cells = Self.cells(line)
                if cells.allSatisfy({ $0.allSatisfy { $0 == "-" || $0 == ":" } }) { continue }  // the separator row
                guard let columns = header else {
                    header = cells.map(inline)
                    continue
                }
                output.append(inline(cells.first ?? ""))
                for (index, cell) in cells.enumerated().dropFirst() {
                    let name = index < columns.count ? columns[index] : ""
                    output += wrap(name + ": " + inline(cell), indent: "    ", first: "  ", width: width)
                }
                continue
            }
            if header != nil {
                header = nil
            }
            if line.hasPrefix("#") {
                let title = inline(String(line.drop { $0 == "#" }.drop { $0 == " " }))
                output.append(title)
                output.append(String(repeating: line.hasPrefix("# ") ? "=" : "-", count: title.count))
                continue
            }
            if line.hasPrefix("- ") {
                output += wrap(inline(String(line.dropFirst(2))), indent: "  ", first: "- ", width: width)
                continue
            }
            output += line.isEmpty ? [""] : wrap(inline(line), indent: "", first: "", width: width)
        }
        // One blank line between blocks, however many the dropped markup left.
        var lines: [String] = []
        for line in output where !(line.isEmpty && (lines.last?.isEmpty ?? true)) { lines.append(line) }
        while lines.last?.isEmpty == true { lines.removeLast() }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The cells of a table row, trimmed.
    static func cells(_ line: String) -> [String] {
        var body = Substring(line)
        if body.hasPrefix("|") { body = body.dropFirst() }
        if body.hasSuffix("|") { body = body.dropLast() }
        return body.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingSpaces() }
    }

    /// Inline markup removed: `code`, **bold**, [text](address) → text (address).
    static func inline(_ text: String) -> String {
        var result = ""
        var rest = Substring(text)
        while let character = rest.first {
            if character == "[", let close = rest.firstIndex(of: "]"), rest[rest.index(after: close)...].hasPrefix("("),
                let end = rest[close...].firstIndex(of: ")")
            {
                let label = rest[rest.index(after: rest.startIndex)..<close]
                let address = rest[rest.index(close, offsetBy: 2)..<end]
                result += label == address ? String(label) : "\(label) (\(address))"
                rest = rest[rest.index(after: end)...]
                continue
            }
            if rest.hasPrefix("**") {
                rest = rest.dropFirst(2)
                continue
            }
            if character != "`" { result.append(character) }
            rest = rest.dropFirst()
        }
        return result
    }

    /// Words wrapped at `width`, the first line after `first`, the others after `indent`.
    static func wrap(_ text: String, indent: String, first: String, width: Int) -> [String] {
        var lines: [String] = []
        var current = first
        var empty = true
        for word in text.split(separator: " ") {
            if !empty, current.count + 1 + word.count > width {
                lines.append(current)
                current = indent
                empty = true
            }
            current += (empty ? "" : " ") + word
            empty = false
        }
        lines.append(current)
        return lines
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
