import RelaisJOSE
import Synchronization

@testable import RelaisRelay

/// A security event sink that keeps the lines, for tests to read back.
final class CollectedEvents: SecurityEventSink {
    private let lines = Mutex<[String]>([])

    func write(_ line: String) { lines.withLock { $0.append(line) } }

    var text: String { lines.withLock { $0.joined() } }

    /// Every event, parsed; a line that is not one JSON object ending in a newline is kept as an
    /// empty object, so a test comparing names sees it.
    var all: [[String: JSONValue]] {
        lines.withLock { $0 }.map { line in
            guard line.hasSuffix("\n"), line.dropLast().firstIndex(of: "\n") == nil else { return [:] }
            return JSONValue.object(from: Array(line.utf8)) ?? [:]
        }
    }

    var names: [String] { all.map { $0["event"]?.stringValue ?? "?" } }

    func named(_ kind: SecurityEventKind) -> [[String: JSONValue]] { all.filter { $0["event"]?.stringValue == kind.rawValue } }
}
