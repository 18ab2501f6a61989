public import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Writes one line per event to standard output, logfmt-like:
/// `2026-11-24T01:20:42.123Z warning relais.relay: message key=value key="two words"`.
///
/// Message, keys and values are escaped (``LogText/escaped(_:)``): a provider's `error_description`
/// or any other request-borne string can never start a line of its own or hide what follows.
public struct TextLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let label: String
    private let output: @Sendable (String) -> Void

    public init(label: String, level: Logger.Level, output: @escaping @Sendable (String) -> Void = LogText.writeToStandardOutput) {
        self.label = label
        self.logLevel = level
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line = "\(JSONLogHandler.timestamp()) \(event.level.rawValue) \(LogText.escaped(label)): \(LogText.escaped(event.message.description))"
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            line += " \(LogText.escaped(key))=\(Self.value(value))"
        }
        output(line + "\n")
    }

    /// Bare when unambiguous, quoted when empty or holding a space, a quote or an `=`.
    static func value(_ value: Logger.Metadata.Value) -> String {
        let text = switch value {
        case .string(let string): string
        case .stringConvertible(let convertible): convertible.description
        case .array, .dictionary: value.description
        }
        guard text.isEmpty || text.unicodeScalars.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" }) else { return LogText.escaped(text) }
        return "\"" + LogText.escaped(text, quotes: true) + "\""
    }
}

/// Escaping and output shared by the log handlers.
public enum LogText {
    /// The string with backslashes and every character that could break or disguise a log line
    /// escaped: C0 and C1 controls and DEL (`\n`, `\r`, `\t`, else `\uXXXX`), the Unicode line and
    /// paragraph separators, and the bidirectional overrides and isolates. The result is also a
    /// valid JSON string body when `quotes` escapes `"` too.
    public static func escaped(_ string: String, quotes: Bool = false) -> String {
        var output = ""
        output.reserveCapacity(string.utf8.count)
        for scalar in string.unicodeScalars {
            switch scalar.value {
            case 0x5C: output += "\\\\"
            case 0x22 where quotes: output += "\\\""
            case 0x0A: output += "\\n"
            case 0x0D: output += "\\r"
            case 0x09: output += "\\t"
            case 0..<0x20, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069:
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output
    }

    /// One write(2) per line, so lines from concurrent requests do not interleave.
    @Sendable public static func writeToStandardOutput(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(STDOUT_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { break }
                offset += written
            }
        }
    }
}
