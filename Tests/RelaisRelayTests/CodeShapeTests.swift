import Foundation
import RelaisTestSupport
import Testing

/// The shape rules issue 12 set for the sources, checked on every `make test` so that a change
/// which breaks one fails here instead of in a review: files of at most 400 lines, time only from
/// an injected clock, relay types of at most 8 stored properties, and
/// store keys spelled only by `RelayStore.Key`.
@Suite(.tags(.fast)) struct CodeShapeTests {
    private static let sources = RelaisProcess.packageRoot.appendingPathComponent("Sources")

    /// Every Swift file under `Sources/<module>`, as (path relative to Sources, text).
    private static func files(in module: String = "") throws -> [(path: String, text: String)] {
        let root = sources.appendingPathComponent(module)
        guard let walker = FileManager.default.enumerator(atPath: root.path) else { return [] }
        var found: [(String, String)] = []
        for case let relative as String in walker where relative.hasSuffix(".swift") {
            let text = try String(contentsOfFile: root.appendingPathComponent(relative).path, encoding: .utf8)
            found.append((module.isEmpty ? relative : "\(module)/\(relative)", text))
        }
        return found.sorted { $0.0 < $1.0 }
    }

    /// A line without its comment and with its string literals emptied, so that neither a `{` in a
    /// string nor `Date()` in a comment counts.
    static func code(of line: Substring) -> String {
        var out = ""
        var inString = false
        var escaped = false
        var previous: Character = " "
        for character in line {
            if inString {
                if escaped {
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    inString = false
                    out.append(character)
                }
            } else if character == "/", previous == "/" {
                out.removeLast()
                break
            } else {
                if character == "\"" { inString = true }
                out.append(character)
            }
            previous = character
        }
        return out
    }

    /// The types declared in `text` with more stored properties than `limit`: a `let` or a `var`
    /// directly in a type's body, not `static`, not computed (`var x: T { … }`).
    static func typesOverStoredPropertyLimit(_ text: String, limit: Int = 8) -> [String] {
        var over: [String] = []
        var depth = 0
        var open: [(name: String, bodyDepth: Int, stored: Int)] = []
        let declaration = /^\s*(?:@\w+\s+)*(?:(?:public|private|fileprivate|internal|package|final|indirect)\s+)*(?:struct|class|actor|enum)\s+(\w+)/
        let property =
            /^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|private|fileprivate|internal|package|weak|lazy|nonisolated\(unsafe\)|private\(set\)|package\(set\)|public\(set\))\s+)*(let|var)\s+\w+/
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let code = Self.code(of: line)
            if let last = open.last, depth == last.bodyDepth, let match = code.firstMatch(of: property),
                !code.contains("static ")
            {
                let head = code.split(separator: "{", maxSplits: 1).first ?? ""
                let computed = match.output.1 == "var" && code.contains("{") && !head.contains("=")
                if !computed { open[open.count - 1].stored += 1 }
            }
            if let match = code.firstMatch(of: declaration), code.contains("{") {
                open.append((String(match.output.1), depth + 1, 0))
            }
            depth += code.count(where: { $0 == "{" }) - code.count(where: { $0 == "}" })
            while let last = open.last, depth < last.bodyDepth {
                open.removeLast()
                if last.stored > limit { over.append("\(last.name) (\(last.stored))") }
            }
        }
        return over
    }

    @Test func noSourceFileIsOver400Lines() throws {
        let files = try Self.files()
        #expect(files.count > 100)
        for file in files {
            let lines = file.text.split(separator: "\n", omittingEmptySubsequences: false).count - (file.text.hasSuffix("\n") ? 1 : 0)
            #expect(lines <= 400, "\(file.path) has \(lines) lines")
        }
    }

    /// The files that may read the wall clock themselves, and why.
    static let wallClockReaders: [String: String] = [
        // RelaisKit builds on iOS with Foundation only, without RelaisClock (its Mutex needs
        // iOS 18): this is its one reading, behind RelaisKitClock, which its tests replace.
        "RelaisKit/Platform/DeviceClock.swift": "the app library's device clock"
    ]

    /// Time comes from an injected clock everywhere: RelaisClock is where the wall clock is read
    /// (`SystemClock`, for the CLI and the bench too), so that tests move time instead of sleeping.
    @Test func everyModuleTakesTimeFromTheClock() throws {
        let files = try Self.files().filter { !$0.path.hasPrefix("RelaisClock/") }
        #expect(Set(Self.wallClockReaders.keys).isSubset(of: files.map(\.path)), "an exception names a file that is gone")
        for file in files where Self.wallClockReaders[file.path] == nil {
            for (number, line) in file.text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where Self.code(of: line).contains("Date()") {
                Issue.record("\(file.path):\(number + 1) calls Date(): take the time from the injected clock")
            }
        }
    }

    @Test func noRelayTypeHasMoreThan8StoredProperties() throws {
        for file in try Self.files(in: "RelaisRelay") {
            let over = Self.typesOverStoredPropertyLimit(file.text)
            #expect(over.isEmpty, "\(file.path): \(over.joined(separator: ", "))")
        }
    }

    /// The count the rule relies on: stored properties counted, computed and static ones and a
    /// function's locals not, nested types apart.
    @Test func storedPropertiesAreCountedAsTheRuleMeans() {
        let nine = (1...9).map { "    var p\($0): Int" }.joined(separator: "\n")
        let text = """
            struct Wide {
            \(nine)
            }
            struct Narrow {
                let a: Int
                var b: String = "{"
                var computed: Int { a }
                static let shared = 1
                var both: Int {
                    get { a }
                    set {}
                }
                func f() { let local = 1; _ = local }
                struct Inner {
            \(nine)
                }
            }
            """
        #expect(Self.typesOverStoredPropertyLimit(text) == ["Wide (9)", "Inner (9)"])
    }

    /// Each store key prefix (`"session:{…}"`, `"tx:…"`) is spelled in `RelayStore.Key` and
    /// nowhere else in the relay.
    @Test func storeKeysAreSpelledOnlyByRelayStore() throws {
        let relay = try Self.files(in: "RelaisRelay")
        let owner = try #require(relay.first { $0.path == "RelaisRelay/Store/RelayStore.swift" })
        let keyFunction = /static func \w+\([^)]*\) -> String \{ "([a-z-]+):/
        let prefixes = Set(owner.text.matches(of: keyFunction).map { String($0.output.1) })
        #expect(prefixes.isSuperset(of: ["tx", "code", "session", "rt", "sc", "web"]), "RelayStore.Key was not read: \(prefixes.sorted())")
        for file in relay where file.path != owner.path {
            for (number, line) in file.text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                for prefix in prefixes where line.contains("\"\(prefix):") {
                    Issue.record("\(file.path):\(number + 1) spells the store key prefix \"\(prefix):\": use RelayStore.Key")
                }
            }
        }
    }
}
